#!/bin/sh
# Issue 5's training figures: the digits MLP (64-128-128-10, batch 64, Adam)
# trained by share/examples/digits/train against the same loop in PyTorch
# eager (train_torch.py: 2.x and Debian's 1.13, whichever are installed),
# with the same thread count; steps per second, the growth of the peak
# resident memory over the training loop (what training steps add, after
# the program, its libraries and the data are in), and the peak of each
# whole process (/usr/bin/time), as ratios.  Run from the build folder
# (make bench).
set -e
. "$(dirname "$0")/../quick.sh"
srcdir=${srcdir:-$(dirname "$0")/../..}
data=$srcdir/share/datasets/digits.csv.gz
train=share/examples/digits/train
[ -x "$train" ] || make -s "$train" >/dev/null
threads=${TN_NUM_THREADS:-$(nproc)}
export TN_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
epochs=${BENCH_EPOCHS:-10}
[ -n "$quick" ] && epochs=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME CMD...: best steps/s and the growth line's KiB (from the
# program's last stderr line), and the process's max RSS (KiB)
run() {
    name=$1
    shift
    best=0
    for i in $(seq "${quick:-3}"); do
        /usr/bin/time -f 'maxrss %M' -o "$tmp/time" "$@" > /dev/null 2> "$tmp/err"
        sps=$(awk '/steps\/s/ { print $NF }' "$tmp/err")
        grow=$(awk '/steps\/s/ { print $(NF - 3) }' "$tmp/err")
        best=$(awk -v a="$best" -v b="$sps" 'BEGIN { print (b > a ? b : a) }')
    done
    rss=$(awk '/maxrss/ { print $2 }' "$tmp/time")
    echo "$name $best $rss $grow"
}

ours=$(run tensorkit "$train" --data "$data" --epochs "$epochs" --output '')
echo "digits MLP, batch 64, Adam, $epochs epochs, $threads threads"
set -- $ours
printf '  %-18s %7.1f steps/s  training adds %7.1f MiB  process peak %7.1f MiB\n' tensorkit \
    "$2" "$(echo "$4" | awk '{ print $1 / 1024 }')" "$(echo "$3" | awk '{ print $1 / 1024 }')"
our_sps=$2 our_rss=$3 our_grow=$4
quick_done "digits MLP, 1 epoch"
for py in "$(command -v python3)" /usr/bin/python3; do
    [ -n "$py" ] && "$py" -c 'import torch' 2>/dev/null || continue
    v=$("$py" -c 'import torch; print(torch.__version__)')
    case "$seen" in *" $v "*) continue ;; esac
    seen="$seen $v "
    r=$(run "torch-$v" "$py" "$srcdir/share/examples/digits/train_torch.py" --data "$data" \
        --epochs "$epochs" --threads "$threads")
    set -- $r
    awk -v n="PyTorch $v" -v s="$2" -v m="$3" -v g="$4" -v os="$our_sps" -v om="$our_rss" \
        -v og="$our_grow" 'BEGIN {
        printf "  %-18s %7.1f steps/s  training adds %7.1f MiB  process peak %7.1f MiB\n", n, s,
               g / 1024, m / 1024
        printf "    tensorkit against it: %.2fx the steps/s, %.2fx the training memory, %.3fx the process peak\n",
               os / s, (g > 0 ? og / g : 0), om / m }'
done
