# tckpt: checkpoint inspect, convert, verify, scan.
