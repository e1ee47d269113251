# What the end-to-end test scripts share; sourced by tests/*_test.sh.
#   ok NAME / bad NAME     a passed or failed check, counted
#   finish                 the counts; the script's exit status (0: none failed)
#   same_files A B FILE... each FILE is identical in folders A and B
#   fmnist_subset DIR N M  the first N training and M test images of Fashion-MNIST (the Debian
#                          package's) as raw IDX files in DIR: a run starts in a blink
failures=0
passes=0
ok() { echo "ok    $1"; passes=$((passes + 1)); }
bad() { echo "FAIL  $1"; failures=$((failures + 1)); }
finish() {
  echo "$passes passed, $failures failed"
  [ "$failures" -eq 0 ]
}

same_files() {
  local a=$1 b=$2 f
  shift 2
  for f in "$@"; do cmp -s "$a/$f" "$b/$f" || return 1; done
}

fmnist_subset() {
  python3 - "$@" <<'PY'
import gzip, os, sys
src, out, n_train, n_test = "/usr/share/datasets/fashion-mnist", sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out)
for prefix, n in (("train", n_train), ("t10k", n_test)):
    for kind, head, size in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
        raw = gzip.open(f"{src}/{prefix}-{kind}-ubyte.gz").read(head + n * size)
        with open(f"{out}/{prefix}-{kind}-ubyte", "wb") as f:
            f.write(raw[:4] + n.to_bytes(4, "big") + raw[8:head] + raw[head:])
PY
}

# fmnist_folder DIR N_TRAIN N_TEST: an image folder ({dir}/{split}/{class}/*.png, 28 x 28 gray)
# of the first N_TRAIN and N_TEST Fashion-MNIST images of four classes.
fmnist_folder() {
  python3 - "$@" <<'PY'
import gzip, os, struct, sys, zlib
root, src = sys.argv[1], "/usr/share/datasets/fashion-mnist"
names = {0: "T-shirt-top", 1: "Trouser", 8: "Bag", 9: "Ankle boot"}
def png(path, px):  # 28 x 28 gray, 8 bits
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\0" + px[28 * y:28 * y + 28] for y in range(28))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for split, prefix, n in (("train", "train", int(sys.argv[2])), ("test", "t10k", int(sys.argv[3]))):
    images = gzip.open(f"{src}/{prefix}-images-idx3-ubyte.gz").read()[16:]
    labels = gzip.open(f"{src}/{prefix}-labels-idx1-ubyte.gz").read()[8:]
    written = 0
    for i in range(len(labels)):
        if written == n:
            break
        if labels[i] in names:
            os.makedirs(f"{root}/{split}/{names[labels[i]]}", exist_ok=True)
            png(f"{root}/{split}/{names[labels[i]]}/{i:05d}.png", images[784 * i:784 * i + 784])
            written += 1
PY
}
