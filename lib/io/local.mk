# lib/io: zip, pickle, torch checkpoints, safetensors, npy/npz.
