#!/usr/bin/env bats
# tckpt's inputs and outputs as a shell user meets them: '-' for standard
# input and output, pipes and /dev/stdin read, symlinks and devices written
# through, failed writes to standard output, folders, several files, and
# options that do not apply to a subcommand.

load helper
load tckpt-helper

setup() {
    FX="$TN_SRCDIR/tests/fixtures/io"
    T="$BATS_TEST_TMPDIR"
}

@test "'-', /dev/stdin and pipes are read as inputs by every subcommand" {
    want=$(tckpt ls "$FX/module_2.pt")
    run tckpt ls - <"$FX/module_2.pt"
    assert_success
    assert_output "$want"
    run tckpt ls /dev/stdin <"$FX/module_2.pt"
    assert_output "$want"
    run tckpt ls <(cat "$FX/module_2.pt")
    assert_success
    assert_output "$want"
    run bash -c "cat '$FX/module_2.pt' | tckpt ls -"
    assert_output "$want"
    run tckpt show - <"$FX/optim_2.pt"
    assert_success
    assert_line --partial "'eps': 1e-08"
    run tckpt diff - "$FX/module_2.pt" <"$FX/module_1.pt"
    assert_success
    assert_output --partial "9 tensors match"
    run tckpt verify - <"$FX/module_2.pt"
    assert_success
    assert_output --partial "ok (torch, 9 tensors)"
    tckpt convert - "$T/m.safetensors" <"$FX/module_2.pt"
    run tckpt diff "$FX/module_2.pt" "$T/m.safetensors"
    assert_success
    run tckpt get <(cat "$FX/dtypes_2.pt") float64 -o "$T/f.npy"
    assert_success
    cmp "$T/f.npy" <(tckpt get "$FX/dtypes_2.pt" float64)
}

@test "convert and get write '-', /dev/stdout and pipes directly, symlinks through" {
    tckpt convert --to safetensors "$FX/module_2.pt" - >"$T/a.safetensors"
    run tckpt diff "$FX/module_2.pt" "$T/a.safetensors"
    assert_success
    tckpt convert --to torch "$FX/module_2.pt" /dev/stdout | cat >"$T/b.pt"
    run tckpt diff "$FX/module_2.pt" "$T/b.pt"
    assert_success
    run tckpt convert "$FX/module_2.pt" -
    assert_failure 2
    assert_output --partial "use --to"
    # a symlink stays a link, its target is replaced
    mkdir "$T/real"
    echo old >"$T/real/m.safetensors"
    ln -s real/m.safetensors "$T/link.safetensors"
    tckpt convert "$FX/module_2.pt" "$T/link.safetensors"
    [ -L "$T/link.safetensors" ]
    run tckpt diff "$FX/module_2.pt" "$T/real/m.safetensors"
    assert_success
    echo old >"$T/real/w.npy"
    ln -s real/w.npy "$T/w.npy"
    tckpt get "$FX/dtypes_2.pt" float64 -o "$T/w.npy"
    [ -L "$T/w.npy" ]
    cmp "$T/real/w.npy" <(tckpt get "$FX/dtypes_2.pt" float64 -o -)
    tckpt get "$FX/dtypes_2.pt" float64 -o /dev/stdout | cat >"$T/p.npy"
    cmp "$T/real/w.npy" "$T/p.npy"
    # nothing half-written: no temporaries left
    run ls -A "$T/real"
    assert_output "$(printf 'm.safetensors\nw.npy')"
}

@test "get writes to standard output by default: .npy bytes numpy reads" {
    require_torch2
    tckpt get "$FX/dtypes_2.pt" float64 >"$T/o.npy"
    run "$TORCH2" -c '
import sys, numpy as np, torch
a = np.load(sys.argv[1]); t = torch.load(sys.argv[2])["float64"]
print(np.array_equal(a, t.numpy(), equal_nan=True))' "$T/o.npy" "$FX/dtypes_2.pt"
    assert_output "True"
}

@test "a failed write to standard output exits 2 with a message" {
    for cmd in "ls $FX/module_2.pt" "ls --json $FX/module_2.pt" "show $FX/optim_2.pt" \
               "show --json $FX/optim_2.pt" "verify $FX/module_2.pt" \
               "diff $FX/module_1.pt $FX/module_2.pt" "diff --json $FX/module_1.pt $FX/module_2.pt" \
               "get $FX/dtypes_2.pt float64" "show $FX/module_2.pt 0.weight" "--help"; do
        run bash -c "tckpt $cmd >/dev/full"
        echo "tckpt $cmd: $output"
        assert_failure 2
        assert_output --partial "<stdout>: cannot write: No space left on device"
    done
}

@test "a folder where a file is expected: 'Is a directory', exit 2" {
    mkdir "$T/d"
    for cmd in "ls $T/d" "verify $T/d" "show $T/d" "get $T/d x" "diff $T/d $FX/module_2.pt" \
               "convert $T/d $T/o.pt"; do
        run tckpt $cmd
        echo "tckpt $cmd: $output"
        assert_failure 2
        assert_output "tckpt: $T/d: Is a directory"
    done
    run tckpt convert --to torch "$FX/module_2.pt" "$T/d"
    assert_failure 2
    assert_output --partial "Is a directory"
}

@test "ls and verify take several files; the exit status is the worst" {
    run tckpt ls "$FX/module_2.pt" "$FX/views_2.pt"
    assert_success
    assert_line "$FX/module_2.pt:"
    assert_line "$FX/views_2.pt:"
    assert_line "9 tensors, 112 bytes; 9 storages, 112 bytes stored"
    assert_line "6 tensors, 212 bytes; 1 storage, 48 bytes stored"
    run tckpt ls --json "$FX/module_2.pt" "$FX/views_2.pt"
    assert_success
    run python3 -c 'import json, sys; print([json.loads(l)["total_tensors"] for l in sys.stdin])' <<<"$output"
    assert_output "[9, 6]"
    run tckpt ls "$FX/module_2.pt" /nonexistent.pt "$FX/views_2.pt"
    assert_failure 2
    assert_line "tckpt: /nonexistent.pt: No such file or directory"
    assert_line "6 tensors, 212 bytes; 1 storage, 48 bytes stored"
    crc_broken "$FX/module_2.pt" "$T/crc.pt"
    run tckpt verify "$FX/module_2.pt" "$T/crc.pt" "$FX/views_2.pt"
    assert_failure 1
    assert_line "$FX/module_2.pt: ok (torch, 9 tensors)"
    assert_line --partial "module_2/data/0: CRC-32 is"
    assert_line "$FX/views_2.pt: ok (torch, 6 tensors)"
    run tckpt verify "$T/crc.pt" /nonexistent.pt
    assert_failure 2
}

@test "verify removes the temporaries a killed writer left, and says so" {
    cp "$FX/module_2.pt" "$T/m.pt"
    echo partial >"$T/.m.pt.tmp-AbC123"
    echo partial >"$T/.m.pt.tmp-XyZ789"
    # older than a live writer's, and not locked by one
    touch -d '1 hour ago' "$T/.m.pt.tmp-AbC123" "$T/.m.pt.tmp-XyZ789"
    run tckpt verify "$T/m.pt"
    assert_success
    assert_line "$T/m.pt: removed 2 stale temporary files that an interrupted write left"
    assert_line "$T/m.pt: ok (torch, 9 tensors)"
    [ ! -e "$T/.m.pt.tmp-AbC123" ]
    run tckpt verify "$T/m.pt"
    assert_output "$T/m.pt: ok (torch, 9 tensors)"
}

@test "an option that does not apply to the subcommand is a usage error" {
    m="$FX/module_2.pt"
    # every option with a value it would take, and the subcommands it fits
    while read -r o fits; do
        for cmd in "ls $m" "show $m" "get $m 0.weight" "verify $m" "convert $m $T/x.pt" "diff $m $m"; do
            sub=${cmd%% *}
            case " $fits " in *" $sub "*) continue ;; esac
            run tckpt $cmd $o
            echo "tckpt $cmd $o: $output"
            assert_failure 2
            assert_line --index 0 --regexp "^tckpt: $sub: --[a-z-]+ does not apply to $sub$"
            assert_line --index 1 "Try 'tckpt --help' for more information."
        done
    done <<'OPTS'
--json ls show diff
-o=/dev/null get
--to=torch convert
--dtype=f16 convert
--layout=torch1 convert
--keys=* convert
--torch1 ls show get verify convert diff
--atol=1 diff
--rtol=1 diff
--only-tensors diff
--prefix=a. diff
OPTS
}

@test "plurals: one tensor, one storage, one item" {
    python3 -c '
import sys
from safetensors.numpy import save_file
import numpy as np
save_file({"w": np.zeros(2, np.float32)}, sys.argv[1])' "$T/one.safetensors"
    run tckpt ls "$T/one.safetensors"
    assert_line "1 tensor, 8 bytes; 1 storage, 8 bytes stored"
    run tckpt verify "$T/one.safetensors"
    assert_output "$T/one.safetensors: ok (safetensors, 1 tensor)"
    run tckpt diff "$T/one.safetensors" "$T/one.safetensors"
    assert_output "$T/one.safetensors and $T/one.safetensors: 1 tensor matches"
    run tckpt show "$T/one.safetensors"
    assert_line "OrderedDict (1 item)"
}
