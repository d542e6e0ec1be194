#!/usr/bin/env bats
# tcompile train (issue 17) holds --data and --eval in memory: a data set
# larger than the memory available is refused by name before any of it is
# read (tests/fixtures/huge_npz.py: an .npz whose zip64 sizes say 512 GiB).

load helper

setup() {
    F="$TN_SRCDIR/tests/fixtures/train"
    W="$BATS_TEST_TMPDIR"
    [ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
    /usr/bin/python3 "$TN_SRCDIR/tests/fixtures/huge_npz.py" "$W/huge.npz"
}

@test "train: --data larger than the memory available is refused before it is read" {
    run tcompile train "$F/mlp_ce.json" -w "$F/mlp_ce.pt" --data "$W/huge.npz" \
        --optimizer sgd --lr 0.1 --steps 2
    assert_failure 2
    assert_output --regexp "huge.npz: its arrays take 524288 MiB, more than the [0-9]+ MiB of memory available \(tcompile train holds the data in memory\)$"
    [ "${#lines[@]}" -eq 1 ]
}

@test "train: --eval larger than the memory available is refused before it is read" {
    run tcompile train "$F/mlp_ce.json" -w "$F/mlp_ce.pt" --data "$F/data.npz" \
        --eval "$W/huge.npz" --optimizer sgd --lr 0.1 --steps 2
    assert_failure 2
    assert_output --regexp "huge.npz: its arrays take 524288 MiB, more than the [0-9]+ MiB"
}
