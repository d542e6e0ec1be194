#!/usr/bin/env bats
# tcompile train (issue 17): the MLP with its cross-entropy loss of
# tests/fixtures/graph_train.py, trained through the compiled forward and
# backward graphs of tcompile grad: the losses of 200 steps equal
# PyTorch's step by step (tests/fixtures/train_torch.py, same weights, data
# and shuffles) with SGD, Adam and AdamW, and those of 50 steps with
# non-default optimizer options (--momentum, --dampening, --nesterov,
# --betas, --eps, --weight-decay) equal the committed curves of
# train_torch.py --write and live PyTorch's; a run stopped at step 100 and
# resumed ends with the weights of an unbroken one, bit for bit; bad
# input is refused with one line and exit 2.

load helper

# PyTorch's curves and checks run in the file's fork server (torch and
# torch._dynamo, which torch.optim imports, imported once)
setup_file() {
    torch2_serve torch._dynamo
}

teardown_file() {
    torch2_stop
}

setup() {
    F="$TN_SRCDIR/tests/fixtures/train"
    G="$TN_SRCDIR/tests/fixtures/graph/torch2"
    W="$BATS_TEST_TMPDIR"
}

train() {
    tcompile train "$F/mlp_ce.json" -w "$F/mlp_ce.pt" --data "$F/data.npz" "$@"
}

# same_curve OPTIMIZER LR: 200 steps, ours and PyTorch's
same_curve() {
    require_torch2
    run train --optimizer "$1" --lr "$2" --steps 200 --log-loss
    assert_success
    echo "$output" > "$W/ours"
    run torch2 "$TN_SRCDIR/tests/fixtures/train_torch.py" "$F" "$1" "$2" 200
    assert_success
    echo "$output" > "$W/theirs"
    same_losses_as "$W/ours" "$W/theirs" 200
}

# seeded_curve MODEL STEPS: STEPS AdamW steps of tests/fixtures/train/MODEL
# with --seed 3 (its dropout masks from the default generator), ours and
# PyTorch's (train_torch.py --model MODEL)
seeded_curve() {
    require_torch2
    run tcompile train "$F/$1.json" -w "$F/$1.pt" --data "$F/data.npz" \
        --optimizer adamw --lr 0.01 --seed 3 --steps "$2" --log-loss
    assert_success
    echo "$output" > "$W/ours"
    run torch2 "$TN_SRCDIR/tests/fixtures/train_torch.py" --model "$1" "$F" adamw 0.01 "$2" 3
    assert_success
    echo "$output" > "$W/theirs"
    same_losses_as "$W/ours" "$W/theirs" "$2"
}

@test "train: 200 SGD steps give PyTorch's losses" {
    same_curve sgd 0.1
}

@test "train: 200 AdamW steps give PyTorch's losses" {
    same_curve adamw 0.01
}

@test "train: 200 Adam steps give PyTorch's losses" {
    same_curve adam 0.01
}

# option_curve NAME OPTIMIZER LR OPTION...: 50 steps with the optimizer's
# options, ours against tests/fixtures/train/options_NAME.txt (written by
# train_torch.py --write, PyTorch 2.x) and against live PyTorch 2.x where
# installed; train_torch.py takes the options as its constructor's keywords.
option_curve() {
    local name=$1 opt=$2 lr=$3
    shift 3
    run train --optimizer "$opt" --lr "$lr" --steps 50 --log-loss "$@"
    assert_success
    echo "$output" > "$W/ours"
    same_losses_as "$W/ours" "$F/options_$name.txt" 50
    require_torch2
    local kw=() a
    for a in "$@"; do
        case $a in
        --nesterov) kw+=(nesterov=1) ;;
        --*) a=${a#--}; a=${a%%=*}; kw+=("${a//-/_}=${1#*=}") ;;
        esac
        shift
    done
    run torch2 "$TN_SRCDIR/tests/fixtures/train_torch.py" "$F" "$opt" "$lr" 50 "${kw[@]}"
    assert_success
    echo "$output" > "$W/theirs"
    same_losses_as "$W/ours" "$W/theirs" 50
}

@test "train: SGD with --momentum, --dampening and --weight-decay gives PyTorch's losses" {
    option_curve sgd_momentum sgd 0.05 --momentum=0.9 --dampening=0.1 --weight-decay=0.001
}

@test "train: SGD with --nesterov gives PyTorch's losses" {
    option_curve sgd_nesterov sgd 0.05 --momentum=0.8 --nesterov --weight-decay=0.0001
}

@test "train: Adam with --betas, --eps and --weight-decay gives PyTorch's losses" {
    option_curve adam_options adam 0.01 --betas=0.8,0.99 --eps=1e-6 --weight-decay=0.01
}

@test "train: AdamW with --betas, --eps and --weight-decay gives PyTorch's losses" {
    option_curve adamw_options adamw 0.01 --betas=0.85,0.995 --eps=1e-7 --weight-decay=0.1
}

@test "train: one JSON line per epoch, the loss falling" {
    run train --optimizer adamw --lr 0.01 --epochs 3
    assert_success
    assert_line --index 0 --regexp '^\{"epoch": 1, "step": 8, "loss": [0-9.]+, "examples_per_s": [0-9.]+\}$'
    assert_line --index 2 --regexp '^\{"epoch": 3, "step": 24, '
    first=$(sed -n '1s/.*"loss": \([0-9.]*\).*/\1/p' <<< "$output")
    last=$(sed -n '3s/.*"loss": \([0-9.]*\).*/\1/p' <<< "$output")
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
}

@test "train: stopped at step 100 and resumed, step 200 equals an unbroken run bit for bit" {
    run train --optimizer adamw --lr 0.01 --seed 7 --steps 200 --save "$W/full.pt"
    assert_success
    run train --optimizer adamw --lr 0.01 --seed 7 --steps 100 --save-every 50 --save "$W/half.pt"
    assert_success
    run train --optimizer adamw --lr 0.01 --seed 7 --steps 200 --resume "$W/half.pt" \
        --save "$W/resumed.pt"
    assert_success
    assert_line --index 0 --regexp '^\{"epoch": 13, "step": 104, '
    run tckpt diff --atol 0 --rtol 0 "$W/full.pt" "$W/resumed.pt"
    assert_success
    assert_output --partial "17 tensors match" # the model's, AdamW's moments, rng_state
}

@test "train: --seed seeds dropout as torch.manual_seed: 200 AdamW steps of mlp_drop give PyTorch's losses" {
    # --seed seeded the shuffle alone: the masks came from the initial
    # seed, where a PyTorch script calling torch.manual_seed(3) draws them
    # after seed 3 (main's first loss already 1.369, PyTorch's 1.325)
    seeded_curve mlp_drop 200
    # and the generator saved is torch.manual_seed(5)'s where nothing drew
    run train --optimizer sgd --lr 0.1 --seed 5 --steps 2 --save "$W/seeded.pt"
    assert_success
    run torch2 -c "
import torch
print(torch.equal(torch.load('$W/seeded.pt')['rng_state'], torch.Generator().manual_seed(5).get_state()))"
    assert_success
    assert_output "True"
}

@test "train: sdpa with dropout draws a new mask each step, PyTorch's: 50 AdamW steps of mlp_sdpa_drop give PyTorch's losses" {
    # the joint graph used to run sdpa's dropout as _tn_attention with seed
    # 0: one mask, another than PyTorch's, on every step
    seeded_curve mlp_sdpa_drop 50
}

@test "train: F.mse_loss against a broadcast target and h ** 2: 200 AdamW steps give PyTorch's losses" {
    # torch.export writes aten.broadcast_tensors then mse_loss, and h ** 2
    # as pow.Tensor_Scalar: main refused both (no op, no graph derivative)
    run tcompile train "$F/mlp_mse.json" -w "$F/mlp_mse.pt" --data "$F/regress.npz" \
        --optimizer adamw --lr 0.01 --steps 200 --log-loss
    assert_success
    echo "$output" > "$W/ours"
    same_losses_as "$W/ours" "$F/mlp_mse_adamw.txt" 200
    require_torch2
    # (-W ignore: mse_loss warns on stderr that the target's size differs)
    run torch2 -W ignore "$TN_SRCDIR/tests/fixtures/train_torch.py" --model mlp_mse "$F" adamw 0.01 200
    assert_success
    echo "$output" > "$W/theirs"
    same_losses_as "$W/ours" "$W/theirs" 200
}

# resumes_bit_for_bit CMD N HALF: CMD (a function running tcompile train)
# for N steps, and for HALF steps then resumed to N: the checkpoints equal
# bit for bit (tckpt diff's output left in $output).
resumes_bit_for_bit() {
    run "$1" --steps "$2" --save "$W/full.pt"
    assert_success
    run "$1" --steps "$3" --save "$W/half.pt"
    assert_success
    run "$1" --steps "$2" --resume "$W/half.pt" --save "$W/resumed.pt"
    assert_success
    run tckpt diff --atol 0 --rtol 0 "$W/full.pt" "$W/resumed.pt"
    assert_success
}

@test "train: dropout's generator in the checkpoint: stopped at step 100 and resumed equals an unbroken run bit for bit" {
    # mlp_drop draws a dropout mask each step from the default generator;
    # a resume without its state (rng_state) would draw step 101's mask
    # from the initial seed and the weights would differ
    drop() {
        tcompile train "$F/mlp_drop.json" -w "$F/mlp_drop.pt" --data "$F/data.npz" \
            --optimizer adamw --lr 0.01 --seed 3 "$@"
    }
    resumes_bit_for_bit drop 200 100
    assert_output --partial "17 tensors match"
    # a bad rng_state is refused, naming the checkpoint
    require_torch2
    torch2 -c "
import torch
ck = torch.load('$W/half.pt'); ck['rng_state'] = ck['rng_state'][:100]; torch.save(ck, '$W/bad.pt')"
    run drop --steps 200 --resume "$W/bad.pt"
    assert_failure 2
    assert_output --partial "bad.pt: rng_state: a generator's state is a uint8 tensor of 5056 (or 5048) bytes"
    # the bytes are torch.get_rng_state()'s: PyTorch takes them back as
    # they are, and a run without dropout saves the initial seed's state
    run train --optimizer sgd --lr 0.1 --steps 2 --save "$W/nodrop.pt"
    assert_success
    run torch2 -c "
import torch
r = torch.load('$W/half.pt')['rng_state']
torch.set_rng_state(r)
print(torch.equal(torch.get_rng_state(), r), torch.equal(torch.load('$W/nodrop.pt')['rng_state'],
      torch.Generator().manual_seed(67280421310721).get_state()))"
    assert_success
    assert_output "True True"
}

@test "train: the checkpoint loads in PyTorch (model and optimizer state_dicts)" {
    require_torch2
    run train --optimizer adam --lr 0.01 --steps 10 --save "$W/ck.pt"
    assert_success
    run torch2 -c "
import sys, torch
sys.path.insert(0, '$TN_SRCDIR/tests/fixtures')
from graph_train import MLPLoss
ck = torch.load('$W/ck.pt')
m = MLPLoss(); m.load_state_dict(ck['model'])
o = torch.optim.Adam(m.parameters(), lr=0.01); o.load_state_dict(ck['optimizer'])
print(ck['step'], int(o.state_dict()['state'][0]['step']))"
    assert_success
    assert_output "10 10"
}

@test "train: the options are in the checkpoint's param_groups, which PyTorch loads" {
    require_torch2
    run train --optimizer sgd --lr 0.05 --steps 3 --momentum 0.9 --nesterov --weight-decay 0.001 \
        --save "$W/sgd.pt"
    assert_success
    run train --optimizer adamw --lr 0.01 --steps 3 --betas 0.85,0.995 --eps 1e-7 \
        --weight-decay 0.1 --save "$W/adamw.pt"
    assert_success
    run torch2 -c "
import sys, torch
sys.path.insert(0, '$TN_SRCDIR/tests/fixtures')
from graph_train import MLPLoss
m = MLPLoss()
for f, cls in (('sgd', torch.optim.SGD), ('adamw', torch.optim.AdamW)):
    ck = torch.load('$W/%s.pt' % f)
    m.load_state_dict(ck['model'])
    o = cls(m.parameters(), lr=1.0); o.load_state_dict(ck['optimizer'])
    g = o.param_groups[0]
    print(f, ' '.join('%s=%s' % (k, g[k]) for k in ('lr', 'momentum', 'dampening', 'nesterov', 'betas', 'eps', 'weight_decay') if k in g))
    o.step()"
    assert_success
    assert_line --index 0 "sgd lr=0.05 momentum=0.9 dampening=0 nesterov=True weight_decay=0.001"
    assert_line --index 1 "adamw lr=0.01 betas=(0.85, 0.995) eps=1e-07 weight_decay=0.1"
}

@test "train: a resumed run keeps the checkpoint's optimizer options bit for bit" {
    run train --optimizer sgd --lr 0.05 --steps 40 --momentum 0.9 --dampening 0.1 --save "$W/full.pt"
    assert_success
    run train --optimizer sgd --lr 0.05 --steps 20 --momentum 0.9 --dampening 0.1 --save "$W/half.pt"
    assert_success
    run train --optimizer sgd --lr 0.05 --steps 40 --momentum 0.9 --dampening 0.1 \
        --resume "$W/half.pt" --save "$W/resumed.pt"
    assert_success
    run tckpt diff --atol 0 --rtol 0 "$W/full.pt" "$W/resumed.pt"
    assert_success
}

@test "train: bad optimizer options" {
    run train --optimizer sgd --lr 0.1 --steps 2 --momentum -0.5
    assert_failure 2
    assert_output --partial "--momentum: '-0.5' is not a number from 0 up"
    run train --optimizer sgd --lr 0.1 --steps 2 --weight-decay x
    assert_failure 2
    assert_output --partial "--weight-decay: 'x' is not a number from 0 up"
    run train --optimizer adam --lr 0.1 --steps 2 --betas 0.9,1
    assert_failure 2
    assert_output --partial "--betas: '1' is not a number from 0 up to (not with) 1"
    run train --optimizer adam --lr 0.1 --steps 2 --betas 0.9
    assert_failure 2
    assert_output --partial "--betas: '0.9' is not two numbers B1,B2"
    run train --optimizer adamw --lr 0.1 --steps 2 --eps nan
    assert_failure 2
    assert_output --partial "--eps: 'nan' is not a number from 0 up"
    run train --optimizer sgd --lr 0.1 --steps 2 --nesterov
    assert_failure 2
    assert_output --partial "--nesterov: Nesterov momentum requires a --momentum above 0 and zero --dampening"
    run train --optimizer sgd --lr 0.1 --steps 2 --momentum 0.9 --dampening 0.1 --nesterov
    assert_failure 2
    assert_output --partial "--nesterov: Nesterov momentum requires"
    run train --optimizer adam --lr 0.1 --steps 2 --momentum 0.9
    assert_failure 2
    assert_output --partial "--momentum does not apply to --optimizer adam"
    run train --optimizer sgd --lr 0.1 --steps 2 --betas 0.9,0.99
    assert_failure 2
    assert_output --partial "--betas does not apply to --optimizer sgd"
    run tcompile run --weight-decay 0.1 "$F/mlp_ce.json"
    assert_failure 2
    assert_output --partial "--weight-decay does not apply to 'run'"
}

@test "train: a graph without a loss is refused" {
    run tcompile train "$G/mlp.json" -w "$G/mlp.pt" --data "$F/data.npz" --optimizer sgd --lr 0.1 --steps 2
    assert_failure 2
    assert_output --partial "mlp.json: no loss to train"
}

# bn_curve NAME OPTIMIZER LR: helper.bash's cnn_bn_curve, 200 steps of cnn_bn (batch norm in training
# mode) against tests/fixtures/train/NAME.txt and NAME_state.pt (written by
# train_torch.py --write, PyTorch 2.x) and live PyTorch 2.x where
# installed: the losses step by step, and the checkpoint's model (the
# running statistics and num_batches_tracked among it) against PyTorch's
# state_dict after the last step.
bn_curve() {
    cnn_bn_curve "$@"
    require_torch2
    run torch2 "$TN_SRCDIR/tests/fixtures/train_torch.py" --model cnn_bn --state "$W/theirs.pt" \
        "$F" "$2" "$3" 200
    assert_success
    echo "$output" > "$W/theirs"
    same_losses_as "$W/ours" "$W/theirs" 200
    run tckpt diff --prefix model. --atol 1e-5 --rtol 1e-4 "$W/ck.pt" "$W/theirs.pt"
    assert_success
}

@test "train: 200 SGD steps of a CNN with batch norm: PyTorch's losses and running statistics" {
    bn_curve cnn_bn_sgd sgd 0.1
}

@test "train: 200 AdamW steps of a CNN with batch norm: PyTorch's losses and running statistics" {
    bn_curve cnn_bn_adamw adamw 0.01
}

@test "train: batch norm's running statistics resume bit for bit" {
    bn() {
        tcompile train "$F/cnn_bn.json" -w "$F/cnn_bn.pt" --data "$F/images.npz" \
            --optimizer sgd --lr 0.1 --momentum 0.9 "$@"
    }
    resumes_bit_for_bit bn 60 30
}

# eval_matches THEIRS: the eval_loss and eval_accuracy of the JSON lines in
# $output against THEIRS (one "loss accuracy" line per epoch): losses within
# 1e-4 relative, accuracies equal.
eval_matches() {
    sed -n 's/.*"eval_loss": \([^,]*\), "eval_accuracy": \([^}]*\)}$/\1 \2/p' <<< "$output" > "$W/ours"
    cut -d' ' -f1 "$W/ours" > "$W/ours_loss"
    cut -d' ' -f1 "$1" > "$W/theirs_loss"
    same_losses_as "$W/ours_loss" "$W/theirs_loss" 3
    diff <(cut -d' ' -f2 "$W/ours") <(cut -d' ' -f2 "$1")
}

@test "train: --eval gives each epoch's eval_loss and eval_accuracy in eval mode, PyTorch's" {
    run tcompile train "$F/cnn_bn.json" -w "$F/cnn_bn.pt" --data "$F/images.npz" \
        --eval "$F/images_test.npz" --optimizer sgd --lr 0.1 --epochs 3
    assert_success
    assert_line --index 0 --regexp '^\{"epoch": 1, "step": 8, "loss": [0-9.]+, "examples_per_s": [0-9.]+, "eval_loss": [0-9.]+, "eval_accuracy": 0\.375\}$'
    local out=$output
    eval_matches "$F/cnn_bn_eval.txt"
    require_torch2
    run torch2 "$TN_SRCDIR/tests/fixtures/train_torch.py" --model cnn_bn \
        --eval images_test.npz "$F" sgd 0.1 24
    assert_success
    echo "$output" > "$W/theirs"
    output=$out
    eval_matches "$W/theirs"
}

@test "train: --eval data that does not fit the graph" {
    run train --optimizer sgd --lr 0.1 --steps 2 --eval "$F/images.npz"
    assert_failure 2
    assert_output --partial "images.npz: 'x' is float32[64, 1, 6, 6], but the graph takes float32[8, 6]"
    run tcompile run --eval "$F/data.npz" "$F/mlp_ce.json"
    assert_failure 2
    assert_output --partial "--eval does not apply to 'run'"
}

# ranks_equal_one OPTIMIZER LR: 2 ranks under trun, each a shard of 8 rows
# of each batch of 16, equal one process on mlp_ce16 (the same MLP exported
# for batches of 16) step by step: the losses (the ranks' mean, printed by
# rank 0) within 1e-4 relative, and rank 0's checkpoint (the optimizer's
# state too) within 1e-6 + 1e-5 relative.
ranks_equal_one() {
    run timeout 300 trun --no-python --nproc-per-node 2 --master-port 0 \
        "$TN_BUILDDIR/bin/tcompile/tcompile" train "$F/mlp_ce.json" -w "$F/mlp_ce.pt" \
        --data "$F/data.npz" --optimizer "$1" --lr "$2" --steps 40 --log-loss --save "$W/two.pt"
    assert_success
    refute_line --partial "[1]:"
    sed -n 's/^\[0\]://p' <<< "$output" > "$W/two"
    run tcompile train "$F/mlp_ce16.json" -w "$F/mlp_ce.pt" --data "$F/data.npz" \
        --optimizer "$1" --lr "$2" --steps 40 --log-loss --save "$W/one.pt"
    assert_success
    echo "$output" > "$W/one"
    same_losses_as "$W/two" "$W/one" 40
    run tckpt diff --atol 1e-6 --rtol 1e-5 "$W/one.pt" "$W/two.pt"
    assert_success
    assert_output --regexp ": (5|17) tensors match" # the model's, Adam's moments too, rng_state
}

@test "train under trun: 2 ranks of 8 rows equal 1 process on batches of 16 (SGD)" {
    ranks_equal_one sgd 0.1
}

@test "train under trun: 2 ranks of 8 rows equal 1 process on batches of 16 (AdamW)" {
    ranks_equal_one adamw 0.01
}

@test "train under trun: batch norm's running statistics broadcast from rank 0 before each forward, as PyTorch's DDP" {
    # DDP(broadcast_buffers=True) gives every rank rank 0's buffers before
    # each forward; each rank then updates them from its own shard. Both
    # ranks' state after 12 steps (TCOMPILE_SAVE_RANKS: rank 1 writes
    # CKPT.rank1) against tests/fixtures/train_ddp_torch.py's (PyTorch 2.x,
    # gloo, committed as cnn_bn_ddp.rank{0,1}.pt) and live PyTorch's. Without
    # the broadcast rank 1's running statistics differ (rank 0's do not).
    run env TCOMPILE_SAVE_RANKS=1 timeout 300 trun --no-python --nproc-per-node 2 --master-port 0 \
        "$TN_BUILDDIR/bin/tcompile/tcompile" train "$F/cnn_bn.json" -w "$F/cnn_bn.pt" \
        --data "$F/images.npz" --optimizer sgd --lr 0.1 --steps 12 --log-loss --save "$W/two.pt"
    assert_success
    run tckpt diff --prefix model. --atol 1e-5 --rtol 1e-4 "$W/two.pt" "$F/cnn_bn_ddp.rank0.pt"
    assert_success
    assert_output --partial "8 tensors match"
    run tckpt diff --prefix model. --atol 1e-5 --rtol 1e-4 "$W/two.pt.rank1" "$F/cnn_bn_ddp.rank1.pt"
    assert_success
    assert_output --partial "8 tensors match"
    require_torch2
    run timeout 300 "$TORCH2" "$TN_SRCDIR/tests/fixtures/train_ddp_torch.py" "$F" 0.1 12 "$W/theirs"
    assert_success
    run tckpt diff --prefix model. --atol 1e-5 --rtol 1e-4 "$W/two.pt.rank1" "$W/theirs.rank1.pt"
    assert_success
    assert_output --partial "8 tensors match"
}

@test "train under trun: too few rows for a batch on every rank" {
    require_torch1
    /usr/bin/python3 -c "import numpy as np; np.savez('$W/few.npz', x=np.zeros((12, 6), 'float32'), y=np.zeros(12, 'int64'))"
    run timeout 300 trun --no-python --nproc-per-node 2 --master-port 0 \
        "$TN_BUILDDIR/bin/tcompile/tcompile" train "$F/mlp_ce.json" -w "$F/mlp_ce.pt" \
        --data "$W/few.npz" --optimizer sgd --lr 0.1 --steps 2
    assert_failure
    assert_output --partial "few.npz: holds fewer rows than one batch of 8 on each of 2 ranks"
}

@test "train: data whose shapes do not fit the graph's inputs" {
    require_torch1
    /usr/bin/python3 -c "import numpy as np; np.savez('$W/bad.npz', x=np.zeros((10, 5), 'float32'), y=np.zeros(10, 'int64'))"
    run train --data "$W/bad.npz" --optimizer sgd --lr 0.1 --steps 2
    assert_failure 2
    assert_output --partial "bad.npz: 'x' is float32[10, 5], but the graph takes float32[8, 6]"
}

@test "train: weights or a checkpoint of another model" {
    run tcompile train "$F/mlp_ce.json" -w "$G/mlp.pt" --data "$F/data.npz" --optimizer sgd --lr 0.1 --steps 2
    assert_failure 2
    assert_output --partial "mlp.pt: 'fc2.weight' does not have the graph's dtype and shape"
    run train --optimizer sgd --lr 0.1 --steps 2 --resume "$F/mlp_ce.pt"
    assert_failure 2
    assert_output --partial "mlp_ce.pt: not a checkpoint of tcompile train"
    require_torch1
    /usr/bin/python3 -c "import torch; torch.save({'model': {'a.weight': torch.zeros(2)}, 'optimizer': {}, 'step': 3}, '$W/other.pt')"
    run train --optimizer sgd --lr 0.1 --steps 2 --resume "$W/other.pt"
    assert_failure 2
    assert_output --partial "other.pt: has no 'fc1.weight': the weights (or checkpoint) of another model"
}

@test "train: usage errors" {
    run train --optimizer rmsprop --lr 0.1 --steps 2
    assert_failure 2
    assert_output --partial "--optimizer: 'rmsprop' is not sgd, adam or adamw"
    run train --optimizer sgd --steps 2
    assert_failure 2
    assert_output --partial "train: needs --data, --optimizer, --lr"
    run train --optimizer sgd --lr 0.1 --steps 2 --batch-size 4
    assert_failure 2
    assert_output --partial "--batch-size: the graph was exported for batches of 8, not 4"
    run tcompile run --data x "$F/mlp_ce.json"
    assert_failure 2
    assert_output --partial "--data does not apply to 'run'"
}

@test "train: share/examples/train's job exports, trains, converts and checks in PyTorch" {
    require_torch2
    "$TORCH2" -c 'import safetensors' 2>/dev/null || skip "safetensors is not installed"
    run make -f "$TN_SRCDIR/share/examples/train/job.mk" TOOLS="$TN_BUILDDIR/bin" \
        OUT="$W/job" PYTHON="$TORCH2" MIN_ACCURACY=0.9
    assert_success
    assert_line --regexp '^\{"epoch": 10, "step": 440, '
    assert_line --regexp '^PyTorch: test accuracy 0\.9[0-9]+ of the trained weights$'
}
