#!/usr/bin/env bats
# tckpt scan --policy torch1.13 agrees with PyTorch 1.13's
# torch.load(weights_only=True), run live (Debian's python3-torch): torch
# zips whose data.pkl exercises the globals and opcodes where 1.13 and 2.x
# differ, and 1.13's own state dict and optimizer state.  A file 1.13
# refuses is a finding (exit 1); one it loads is clean (exit 0).  Not here:
# anomalies scan reports under every policy though 1.13 loads them (STOP
# with two items on the stack: stop-stack), and what fails in 1.13 at run
# time rather than by its rules (SETITEM past the end of a list).

load helper

@test "scan --policy torch1.13: refuses exactly what PyTorch 1.13's weights_only refuses" {
    require_torch1
    D=$BATS_TEST_TMPDIR
    /usr/bin/python3 - "$D" >"$D/verdicts" 2>/dev/null <<'PY'
import io, os, sys, zipfile
import torch
out = sys.argv[1]
cases = {
    "ok_odict": b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01X\x01\x00\x00\x00aK\x01s.",
    "ok_int": b"\x80\x02K\x07.",
    "ok_proto0_none": b"N.",
    "binfloat": b"\x80\x02}q\x00X\x02\x00\x00\x00lrq\x01G?\xb9\x99\x99\x99\x99\x99\x9as.",
    "empty_set": b"\x80\x02\x8f.",
    "g_bfloat16": b"\x80\x02ctorch\nbfloat16\nq\x00.",
    "g_bool": b"\x80\x02ctorch\nbool\nq\x00.",
    "g_float32": b"\x80\x02ctorch\nfloat32\nq\x00.",
    "g_builtins_set": b"\x80\x02cbuiltins\nset\n)R.",
    "g_py2_set": b"\x80\x02c__builtin__\nset\n)R.",
    "g_counter": b"\x80\x02ccollections\nCounter\n)R.",
    "g_codecs_encode": b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x06\x00\x00\x00latin1\x86R.",
    "g_sparse_csr": b"\x80\x02ctorch._utils\n_rebuild_sparse_csr_tensor\n.",
    "g_rebuild_v3": b"\x80\x02ctorch._utils\n_rebuild_tensor_v3\n.",
    "stack_global": b"\x80\x04\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93)R.",
    "short_binunicode": b"\x80\x02\x8c\x01a.",
    "frame": b"\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x01.",
    "memoize": b"\x80\x04K\x01\x94.",
    "newobj_size": b"\x80\x02ctorch\nSize\n)\x81.",
    "dup_pop": b"\x80\x02K\x01K\x020.",
    "binbytes": b"\x80\x03C\x01a.",
    "int_text": b"I1\n.",
    "build_dict": b"\x80\x02}}b.",
    "build_list": b"\x80\x02]}b.",
    "build_odict": b"\x80\x02ccollections\nOrderedDict\n)R}b.",
    "append_dict": b"\x80\x02}K\x01a.",
    "appends_tuple": b"\x80\x02)(K\x01e.",
    "appends_list": b"\x80\x02](K\x01K\x02e.",
    "persid_not_storage": b"\x80\x02X\x03\x00\x00\x00abc\x85Q.",
    "persid_str": b"\x80\x02X\x07\x00\x00\x00storageQ.",
    "reduce_size": b"\x80\x02ctorch\nSize\n]\x85R.",
    "long_binput": b"\x80\x02Nr\x00\x00\x00\x00.",
    "proto5_none": b"\x80\x05N.",
    "get_missing": b"\x80\x02h\x05.",
}
files = {}
m = torch.nn.Linear(2, 2)
for name, obj in [("real_state_dict", m.state_dict()),
                  ("real_sgd_state", torch.optim.SGD(m.parameters(), lr=0.1).state_dict())]:
    b = io.BytesIO()
    torch.save(obj, b)
    files[name] = b.getvalue()
base = io.BytesIO()
torch.save({}, base)
zin = zipfile.ZipFile(io.BytesIO(base.getvalue()))
for name, pk in cases.items():
    zb = io.BytesIO()
    with zipfile.ZipFile(zb, "w", zipfile.ZIP_STORED) as z:
        for i in zin.infolist():
            z.writestr(i.filename, pk if i.filename.endswith("/data.pkl") else zin.read(i))
    files[name] = zb.getvalue()
for name, data in files.items():
    p = os.path.join(out, name + ".pt")
    open(p, "wb").write(data)
    try:
        torch.load(p, weights_only=True)
        print(name, 0)
    except Exception:
        print(name, 1)
PY
    [ "$(wc -l <"$D/verdicts")" -eq 36 ]
    # both verdicts occur: the oracle is not one-sided
    grep -q ' 0$' "$D/verdicts" && grep -q ' 1$' "$D/verdicts"
    bad=
    while read -r name want; do
        tckpt scan --policy torch1.13 "$D/$name.pt" >"$D/out" 2>&1 && got=0 || got=$?
        [ "$got" = "$want" ] || bad="$bad $name (1.13: $want, scan: $got: $(cat "$D/out"))"
    done <"$D/verdicts"
    [ -z "$bad" ] || { echo "disagree:$bad"; false; }
}

@test "scan --policy torch1.13: the opcode 1.13 lacks is named" {
    run tckpt scan --policy torch1.13 "$TN_SRCDIR/tests/fixtures/io/optim_2.pt"
    [ "$status" -eq 1 ]
    assert_output --partial "[opcode-not-allowed]: opcode BINFLOAT is outside PyTorch 1.13's weights_only unpickler"
    run tckpt scan --policy torch2 "$TN_SRCDIR/tests/fixtures/io/optim_2.pt"
    assert_success
}
