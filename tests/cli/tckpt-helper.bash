# Shared by tckpt's Bats files.

# crc_broken SRC DST: DST is SRC (a torch zip) with the first byte of its
# data/0 record flipped, which the record's CRC-32 no longer matches
# (torch.load would not notice).
crc_broken() {
    cp "$1" "$2"
    local off
    off=$(python3 -c '
import struct, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
i = next(x for x in z.infolist() if x.filename.endswith("/data/0"))
b = open(sys.argv[1], "rb").read()
n, x = struct.unpack("<HH", b[i.header_offset + 26:i.header_offset + 30])
print(i.header_offset + 30 + n + x)' "$1")
    printf '\377' | dd of="$2" bs=1 seek="$off" conv=notrunc 2>/dev/null
}
