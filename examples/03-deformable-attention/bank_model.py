# Bank-conflict and sector model of the tile design (NOTES.md, backward run 5): the seed size's
# one (batch, head), f16, `tiles q32 split onestep t512`: msda_bwd's one-step filing and flush
# (records slotted (point, corner, query) = "old", or `packed` (point, query, corner) = "new")
# and msda_bwd_tiles' sort, with and without `agg`. Replays each warp instruction's shared
# addresses (wavefronts: the most distinct words on one bank; atomics: the most lanes; 8-byte
# accesses by half-warps) and the flush's global sectors. Not a timing model.
#   python3 bank_model.py uniform|clustered [seed]
import random, math, sys
from collections import defaultdict
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
DIST = sys.argv[1] if len(sys.argv) > 1 else "uniform"
Q, P = 1000, 8
LEVELS = [(92,160),(46,80),(23,40),(12,20)]
QPB, TPQ = 32, 4
THREADS, SPLIT = 512, [1,4,16,32]
TP = [THREADS // s for s in SPLIT]
TILE_FIRST = [0]
for (h,w),tp in zip(LEVELS,TP): TILE_FIRST.append(TILE_FIRST[-1] + (h*w + tp - 1)//tp)
TILES = TILE_FIRST[-1]
CHUNK, HEAVY, HEAVY_CAP = 4*THREADS, 32, 64

def wf32(addrs, atomic=False):
    # addrs: word addresses of the active lanes; wavefronts = most distinct words (atomics: lanes) a bank
    if not addrs: return 0, 0
    b = defaultdict(set) if not atomic else defaultdict(list)
    for a in addrs:
        (b[a % 32].add(a) if not atomic else b[a % 32].append(a))
    return max(len(v) for v in b.values()), 1
def wf64(lanes):
    # lanes: list of (lane, word address of the 8-byte element), half-warps separately
    tot, ideal = 0, 0
    for half in (0,1):
        ws = [a for (l,a) in lanes if l//16 == half]
        if not ws: continue
        b = defaultdict(set)
        for a in ws:
            b[a % 32].add(a); b[(a+1) % 32].add(a+1)
        tot += max(len(v) for v in b.values()); ideal += 1
    return tot, ideal

def px_(p): return p + (p >> 5)
def coords(x, H):
    v = x * H - 0.5
    f = math.floor(v)
    return v, f
# ---- points of one (batch, head)
centre = (random.uniform(0.1,0.9), random.uniform(0.1,0.9))
pts = []  # [q][l][p] -> (corners: list of (k, tile, pixlocal) for inside corners)
for q in range(Q):
    row = []
    for l,(H,W) in enumerate(LEVELS):
        for p in range(P):
            if DIST == "uniform": x, y = random.uniform(-0.05,1.05), random.uniform(-0.05,1.05)
            else: x, y = centre[0]+random.uniform(-0.005,0.005), centre[1]+random.uniform(-0.005,0.005)
            hi, hf = coords(y, H); wi, wf = coords(x, W)
            inside = hi > -1 and wi > -1 and hi < H and wi < W
            cs = []
            if inside:
                for k in range(4):
                    hh, ww = hf + (k>>1), wf + (k&1)
                    if 0 <= hh < H and 0 <= ww < W:
                        pix = hh*W + ww
                        cs.append((k, TILE_FIRST[l] + pix // TP[l], pix % TP[l]))
            row.append(cs)
    pts.append(row)

stats = defaultdict(lambda: [0,0,0])  # name -> [requests, wavefronts, ideal]
def add(name, w_i):
    w, i = w_i
    if i == 0: return
    s = stats[name]; s[0] += 1; s[1] += w; s[2] += i

# ---- point pass: filing and flush, layouts old (corner-major) and new (query-major, corner innermost)
entries = defaultdict(list)   # tile -> list of (q, pixlocal), concatenated over point blocks in block order
gsect = {"old":0, "new":0}; grec = 0
chunks = (Q + QPB - 1)//QPB
for c in range(chunks):
    tcount = defaultdict(int)
    rec = {}  # (i, k, qloc) -> (tile, rank, q, pix)
    for l in range(4):
        for p in range(P):
            i = l*P + p
            for w in range(QPB*TPQ//32):
                # one warp step: lane = qw*4 + k
                byt = defaultdict(list)
                lanes_old, lanes_new = [], []
                for qw in range(8):
                    qloc = w*8 + qw; q = c*QPB + qloc
                    live = q < Q
                    cs = pts[min(q,Q-1)][i] if live else []
                    cd = {k:(t,px) for (k,t,px) in cs}
                    for k in range(4):
                        lane = qw*4 + k
                        lanes_old.append((i*4+k)*QPB + qloc)
                        lanes_new.append((i*QPB+qloc)*4 + k)
                        if k in cd and live: byt[cd[k][0]].append((lane, k, qloc, q, cd[k][1]))
                for tile, ls in byt.items():
                    for r,(lane,k,qloc,q,px) in enumerate(sorted(ls)):
                        rec[(i,k,qloc)] = (tile, tcount[tile] + r, q, px)
                    tcount[tile] += len(ls)
                for rep in range(3):  # rec[slot] (tile, rank), (query, pixel), weight
                    add("pp rec store (old layout)", wf32(lanes_old))
                    add("pp rec store (new layout)", wf32(lanes_new))
    # flush: start of each tile's range (random alignment mod 4 entries)
    start = {t: random.randrange(4) + 4*random.randrange(1<<20) for t in tcount}
    for layout in ("old","new"):
        order = []
        for slot in range(QPB*32*4):
            if layout == "old": i, r = divmod(slot, 4*QPB); k, qloc = divmod(r, QPB)
            else: r, k = divmod(slot, 4); i, qloc = divmod(r, QPB)
            order.append(rec.get((i,k,qloc)))
        for w0 in range(0, len(order), 32):
            secs = set((start[x[0]] + x[1])*8//32 for x in order[w0:w0+32] if x)
            gsect[layout] += len(secs)
    grec += len(rec)
    # entries by tile, in rank order
    by = defaultdict(list)
    for (i,k,qloc),(tile,rank,q,px) in rec.items(): by[tile].append((rank,q,px))
    for tile, v in by.items():
        v.sort(); entries[tile].extend((q,px) for (_,q,px) in v)
print(f"{DIST}: one (batch, head), {grec} records")
print(f"point pass entries' global sectors: old layout {gsect['old']} ({grec*8/gsect['old']:.1f} B used of 32), new {gsect['new']} ({grec*8/gsect['new']:.1f} B)")

# ---- msda_bwd_tiles
for tile in range(TILES):
    l = max(x for x in range(4) if TILE_FIRST[x] <= tile)
    split, tp = SPLIT[l], TP[l]
    ent = entries.get(tile, [])
    for e0 in range(0, len(ent), CHUNK):
        ch = ent[e0:e0+CHUNK]
        hist = defaultdict(int); rank = {}
        for j in range(4):
            for w in range(THREADS//32):
                idx = [j*THREADS + w*32 + lane for lane in range(32)]
                act = [(lane, e) for lane, e in zip(range(32), idx) if e < len(ch)]
                if not act: continue
                # binary search over 32 segments: 5 steps, lanes mostly agree (count as ideal + variety)
                add(f"tiles hist atomic L{l}", wf32([ch[e][1] for _, e in act], atomic=True))
                add(f"agg hist atomic L{l}", wf32(sorted(set(px_(ch[e][1]) for _, e in act))))
                for _, e in act:
                    rank[e] = hist[ch[e][1]]; hist[ch[e][1]] += 1
        off = {}; s = 0
        for px in range(tp): off[px] = s; s += hist[px]
        heavy = [px for px in range(tp) if hist[px] > HEAVY]
        slot = {px: h for h, px in enumerate(heavy)}
        for j in range(4):
            for w in range(THREADS//32):
                act = [(lane, j*THREADS + w*32 + lane) for lane in range(32) if j*THREADS + w*32 + lane < len(ch)]
                if not act: continue
                add(f"tiles off[pix] load L{l}", wf32([ch[e][1] for _, e in act]))
                add(f"agg off[pix] load L{l}", wf32([px_(ch[e][1]) for _, e in act]))
                add(f"tiles list store (uint2) L{l}", wf64([(lane, 2*(off[ch[e][1]] + rank[e])) for lane, e in act]))
        # step 4: pixel threads
        for w in range(THREADS//32):
            lanes = []
            for lane in range(32):
                t = w*32 + lane; px, share = t // split, t % split
                lanes.append((lane, px, share))
            it = 0
            while True:
                act = []
                for lane, px, share in lanes:
                    if hist[px] <= HEAVY:
                        e = off[px] + share + it*split
                        if e < off[px] + hist[px]: act.append((lane, 2*e))
                if not act: break
                add("tiles list load (uint2, pixel threads)", wf64(act)); it += 1
            hs = [(lane, px) for lane, px, share in lanes if hist[px] > HEAVY and share == 0]
            for c in range(32):
                add("tiles hsum load", wf32([slot[px]*32 + c for _, px in hs]))
                add("agg hsum load", wf32([slot[px]*33 + c for _, px in hs]))
        for h, px in enumerate(heavy):
            for it in range(0, hist[px], 8):
                act = [(lane, 2*(off[px] + it + lane//4)) for lane in range(32) if it + lane//4 < hist[px]]
                add("tiles list load (uint2, heavy warp)", wf64(act))
tot_w = tot_i = 0
for name, (r, w, i) in stats.items():
    if name.startswith("tiles"): tot_w += w; tot_i += i
    print(f"{name:42s} requests {r:7d} wavefronts {w:7d} ideal {i:7d} excess {w-i:7d} ({w/max(r,1):.2f} a request)")
print(f"tiles total: wavefronts {tot_w}, ideal {tot_i}, excess {tot_w-tot_i} ({(tot_w-tot_i)/tot_w:.0%}); x48 heads: {tot_w*48/1e6:.2f} M, excess {(tot_w-tot_i)*48/1e6:.2f} M")

def tot(prefixes):
    W = I = 0
    for name, (r, w, i) in stats.items():
        if any(name.startswith(p) for p in prefixes): W += w; I += i
    return W, I
base = tot(["tiles"])
aggd = [n for n in stats if n.startswith("agg")]
repl = {"tiles hist atomic", "tiles off[pix] load", "tiles hsum load"}
W = I = 0
for name, (r, w, i) in stats.items():
    if name.startswith("agg") or (name.startswith("tiles") and not any(name.startswith(x) for x in repl)): W += w; I += i
print(f"with agg: wavefronts {W} (was {base[0]}), excess {W-I} (was {base[0]-base[1]}); x48: {W*48/1e6:.2f} M, excess {(W-I)*48/1e6:.2f} M")
