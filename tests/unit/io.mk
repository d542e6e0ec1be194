# Unit tests of lib/io (zip, pickle, checkpoints, safetensors, npy).
