#!/usr/bin/env bats
# tckpt scan never calls clean what ls cannot read: safetensors and .npy
# headers the loaders refuse (negative or overflowing shapes, unknown
# dtypes, offsets outside the file, overlaps, a header past the end) are
# findings (exit 1) or incomplete (exit 2), with the loader's words; an
# overflowing shape is named as such by scan and ls alike.

load helper

# st NAME HEADER-JSON [DATA-BYTES]: a safetensors file of that header.
st() {
    python3 - "$BATS_TEST_TMPDIR/$1" "$2" "${3:-0}" <<'PY'
import struct, sys
path, hdr, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
hdr += b" " * (-len(hdr) % 8)
open(path, "wb").write(struct.pack("<Q", len(hdr)) + hdr + b"\0" * n)
PY
}

# npy NAME HEADER-DICT [DATA-BYTES]: a .npy file (format 1.0) of that header.
npy() {
    python3 - "$BATS_TEST_TMPDIR/$1" "$2" "${3:-0}" <<'PY'
import struct, sys
path, hdr, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
hdr += b" " * (-(10 + len(hdr) + 1) % 64) + b"\n"
open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + b"\0" * n)
PY
}

# refused FILE REASON WORDS: ls refuses FILE (exit 2) with WORDS, and scan
# reports the anomaly REASON with the same words (exit 1).
refused() {
    run tckpt ls "$BATS_TEST_TMPDIR/$1"
    [ "$status" -eq 2 ]
    assert_output --partial "$3"
    run tckpt scan "$BATS_TEST_TMPDIR/$1"
    [ "$status" -eq 1 ]
    assert_line --regexp "^.*$1@[0-9]+: suspicious \[$2\]: .*$3"
    run tckpt scan --json "$BATS_TEST_TMPDIR/$1"
    [ "$status" -eq 1 ]
    assert_output --partial "\"reason\":\"$2\""
}

@test "scan: safetensors shapes with a negative size are findings" {
    st neg.safetensors '{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}'
    refused neg.safetensors safetensors-shape "shape must hold non-negative integers"
}

@test "scan: safetensors shapes whose size overflows are named so, in scan and ls" {
    # 2^31 * 2^31 * 4 bytes wraps to 0 in 64 bits: data_offsets [0, 0] matched it
    st ovf.safetensors '{"w":{"dtype":"F32","shape":[2147483648,2147483648,4],"data_offsets":[0,0]}}'
    refused ovf.safetensors safetensors-shape "overflow computing the size of 'w'"
    st ovf2.safetensors '{"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'
    refused ovf2.safetensors safetensors-shape "overflow computing the size of 'w'"
}

@test "scan: safetensors offsets outside the file, overlapping or short are findings" {
    st out.safetensors '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}' 4
    refused out.safetensors safetensors-offsets "outside the 4 data bytes"
    st overlap.safetensors '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' 4
    refused overlap.safetensors safetensors-offsets "tensors must be contiguous"
    st size.safetensors '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}' 4
    refused size.safetensors safetensors-offsets "the shape needs 8"
}

@test "scan: a safetensors header length past the end of the file is a finding" {
    printf '\377\377\000\000\000\000\000\000{}' >"$BATS_TEST_TMPDIR/long.safetensors"
    refused long.safetensors safetensors-header-length "is too large"
}

@test "scan: a dtype tensorkit does not know is incomplete, never clean" {
    st dt.safetensors '{"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}}' 4
    npy dt.npy "{'descr': '<q9', 'fortran_order': False, 'shape': (1,), }" 8
    for f in dt.safetensors dt.npy; do
        run tckpt ls "$BATS_TEST_TMPDIR/$f"
        [ "$status" -eq 2 ]
        run tckpt scan "$BATS_TEST_TMPDIR/$f"
        [ "$status" -eq 2 ]
        assert_output --partial "$f: incomplete: $BATS_TEST_TMPDIR/$f: "
    done
    assert_output --partial "dtype '<q9' is not supported"
}

@test "scan: .npy shapes with a negative or overflowing size are findings" {
    npy neg.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"
    refused neg.npy npy-header "negative size"
    npy ovf.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648, 2147483648, 4), }"
    refused ovf.npy npy-header "overflow computing the size of the array"
    npy big.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"
    refused big.npy npy-header "overflow computing the size of the array"
}

@test "scan: a refused .npy inside an .npz is a finding of that member" {
    npy neg.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"
    (cd "$BATS_TEST_TMPDIR" && zip -q bad.npz neg.npy)
    run tckpt scan "$BATS_TEST_TMPDIR/bad.npz"
    [ "$status" -eq 1 ]
    assert_line --regexp 'bad\.npz: neg\.npy@0: suspicious \[npy-header\]: neg\.npy: .npy shape holds a negative size$'
}

@test "scan: well-formed safetensors and .npy from numpy stay clean" {
    python3 -c '
import numpy, sys
numpy.save(sys.argv[1], numpy.zeros((2, 3), numpy.float32))' "$BATS_TEST_TMPDIR/ok.npy"
    st ok.safetensors '{"__metadata__":{"a":"b"},"w":{"dtype":"F32","shape":[2,0],"data_offsets":[0,0]},"v":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}' 8
    run tckpt scan "$BATS_TEST_TMPDIR/ok.npy" "$BATS_TEST_TMPDIR/ok.safetensors"
    assert_success
    assert_output --partial "2 clean, 0 with findings"
}
