#!/usr/bin/env bash
# Boot environment suite: the REAL U-Boot (Debian's u-boot-qemu, qemu_arm64, 2023.01) runs
# the REAL boot script (image/uboot/boot.cmd, compiled by mkimage) in QEMU, on a disk file
# laid out as a unit's (MBR; 1 FAT with boot.scr, pfxenv.a, pfxenv.b; 2 and 3 ext4 slots
# with /boot/vmlinuz, /boot/initrd.img, /boot/pfx-cmdline.txt, made by mke2fs -d). The
# "kernels" are not ARM64 Images, so booti refuses them after the script has chosen the
# slot, counted the attempt, written the environment and set bootargs; the script then
# resets, and -no-reboot ends QEMU. One QEMU run is one boot.
#
# Before each boot, `pfx-agent bootenv print --json` (crates/bootenv) predicts what the
# script will do; after it, the copies are read back from the FAT (mcopy) and printed
# again. Each case checks the serial log's "pfx:" lines and the copy U-Boot wrote (its CRC,
# so byte for byte) against the prediction, AND against the case's own expectation (slot,
# attempts, trial), so the Rust side and the script cannot agree on a wrong answer.
# State changes between boots go through `pfx-agent bootenv rauc` (RAUC's backend calls).
#
#   bash scripts/tests.d/62-bootenv.sh
#   bash scripts/tests.d/62-bootenv.sh bench   # U-Boot's boot delay: 2 s vs 0 (docs/PERFORMANCE.md)
# PFX_AGENT: the pfx-agent to use (target/debug/pfx-agent). PFX_BOOT_CMD: the boot script
# (image/uboot/boot.cmd; a broken copy to watch the suite fail). PFX_BOOTENV_KEEP=1 keeps
# the work directory (serial logs, JSON). About 25 s.
set -uo pipefail
top="${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
need_root "the image suites' tools and QEMU run as root here"
UBOOT=/usr/lib/u-boot/qemu_arm64/u-boot.bin
need_cmds bootenv.apt qemu-system-aarch64 mkimage mcopy mdir mkfs.vfat mke2fs sfdisk fdtput python3 timeout
[ -f "$UBOOT" ] || die "$UBOOT missing (u-boot-qemu, scripts/deps/bootenv.apt)"
AGENT="${PFX_AGENT:-$top/target/debug/pfx-agent}"
[ -x "$AGENT" ] || die "build first (cargo build -p pfx-fleet): $AGENT"
BOOT_CMD="${PFX_BOOT_CMD:-$top/image/uboot/boot.cmd}"

T=$(mktemp -d /tmp/pfx-bootenv-test.XXXXXX)
cleanup() { if [ -n "${PFX_BOOTENV_KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi; }
trap cleanup EXIT INT TERM

DISK=$T/disk.img
# The disk image the boots use (the Pi 4 cases use an SD card copy of it), its FAT, and
# the machine: virt (u-boot-qemu) or rpi4 (u-boot-rpi on QEMU's raspi4b).
IMG=$DISK
MACHINE=virt
DISKID=70667830
ENV=$T/env
mkdir -p "$ENV"

# ---------------------------------------------------------------- the disk
mkimage -A arm64 -T script -C none -d "$BOOT_CMD" "$T/boot.scr" > "$T/mkimage.log" 2>&1 \
  || { cat "$T/mkimage.log"; die "mkimage of $BOOT_CMD"; }
for s in A B; do
  mkdir -p "$T/root$s/boot"
  printf 'not an arm64 Image: slot %s\n' "$s" > "$T/root$s/boot/vmlinuz-6.1.0-test"
  printf 'initrd of slot %s\n' "$s" > "$T/root$s/boot/initrd.img-6.1.0-test"
  # CR LF line end: the script drops both.
  printf 'console=ttyAMA0 pfx.test=%s\r\n' "$s" > "$T/root$s/boot/pfx-cmdline.txt"
done
# Slot A's kernel and initrd are files; slot B's are relative symlinks, as Debian's
# kernel-img.conf link_in_boot makes them. U-Boot's ext4 follows both.
mv "$T/rootA/boot/vmlinuz-6.1.0-test" "$T/rootA/boot/vmlinuz"
mv "$T/rootA/boot/initrd.img-6.1.0-test" "$T/rootA/boot/initrd.img"
ln -s vmlinuz-6.1.0-test "$T/rootB/boot/vmlinuz"
ln -s initrd.img-6.1.0-test "$T/rootB/boot/initrd.img"
truncate -s 34M "$DISK"
# Partition 1 bootable: distro boot scans the bootable partitions for boot.scr.
printf 'label: dos\nlabel-id: 0x%s\n1M,16M,c,*\n17M,8M,83\n25M,8M,83\n' "$DISKID" | sfdisk -q "$DISK" \
  || die "sfdisk"
mkfs.vfat -C "$T/fat.img" $((16*1024)) > /dev/null || die "mkfs.vfat"
mcopy -i "$T/fat.img" "$T/boot.scr" ::boot.scr || die "mcopy boot.scr"
{ mke2fs -q -t ext4 -d "$T/rootA" "$T/a.img" 8M && mke2fs -q -t ext4 -d "$T/rootB" "$T/b.img" 8M; } > "$T/mke2fs.log" 2>&1 \
  || die "mke2fs -d"
dd if="$T/fat.img" of="$DISK" bs=1M seek=1 conv=notrunc status=none
dd if="$T/a.img" of="$DISK" bs=1M seek=17 conv=notrunc status=none
dd if="$T/b.img" of="$DISK" bs=1M seek=25 conv=notrunc status=none

# U-Boot's 2 s boot delay, gone without a saved U-Boot environment: U-Boot reads
# /config/bootdelay from its control device tree, which on qemu_arm64 is QEMU's. The tree
# is dumped with the very options of the boot (with -bios: QEMU's tree differs without it),
# fresh for each boot so its rng-seed and kaslr-seed are new.
QEMU_ARGS=(-cpu cortex-a72 -m 512 -bios "$UBOOT" -nic none
  -drive "file=$DISK,if=none,format=raw,id=d0" -device virtio-blk-pci,drive=d0 -display none)
dtb_for_boot() {
  qemu-system-aarch64 -M "virt,dumpdtb=$T/virt.dtb" "${QEMU_ARGS[@]}" > "$T/dumpdtb.log" 2>&1 \
    && fdtput -c "$T/virt.dtb" /config && fdtput -t i "$T/virt.dtb" /config bootdelay 0
}

put_env() { mcopy -o -i "$IMG@@1M" "$ENV/pfxenv.a" "$ENV/pfxenv.b" :: ; }
get_env() { rm -f "$ENV/pfxenv.a" "$ENV/pfxenv.b"; mcopy -n -i "$IMG@@1M" ::pfxenv.a ::pfxenv.b "$ENV/"; }
agent() { "$AGENT" bootenv --dir "$ENV" "$@"; }

# The check of one boot: the prediction (before.json) against the case's expectations,
# and U-Boot's console and the copies afterwards (after.json) against the prediction.
cat > "$T/check.py" <<'PY'
import json, re, sys
base, diskid, *exp = sys.argv[1:]
exp = dict(e.split("=", 1) for e in exp)
before = json.load(open(base + ".before.json"))
after = json.load(open(base + ".after.json"))
log = open(base + ".serial", "rb").read().decode("latin-1").replace("\r", "")
nb = before["next_boot"]
w = nb["write"]
errs = []
def want(what, got, expect):
    if str(got) != str(expect):
        errs.append(f"{what}: got {got!r}, expected {expect!r}")
# The case's own expectation of the prediction (crates/bootenv).
slot = nb["slot"] or "none"
want("predicted slot", slot, exp.get("slot", slot))
if "before" in exp: want("predicted attempts before", nb["left_before"], exp["before"])
if "trial" in exp: want("predicted trial", int(nb["trial"]), exp["trial"])
if "file" in exp: want("predicted copy written", w["file"], "pfxenv." + exp["file"])
if "seq" in exp: want("predicted PFX_SEQ written", w["seq"], exp["seq"])
if "use" in exp:
    want("predicted copy in force", before["state"]["from"] or "none",
         "none" if exp["use"] == "none" else "pfxenv." + exp["use"])
if "order" in exp: want("predicted BOOT_ORDER written", w["boot_order"], exp["order"])
if "left" in exp: want("predicted counts written", f'{w["a_left"]},{w["b_left"]}', exp["left"])
# What U-Boot did, against the prediction.
m = re.search(r"pfx: env a=(\d):(\d*) b=(\d):(\d*) use=(\w+)", log)
if not m:
    tail = " | ".join(l for l in log.splitlines()[-8:] if l.strip())
    errs.append(f"no 'pfx: env' line on the console, which ends: {tail}")
else:
    use = before["state"]["from"]
    want("copy U-Boot used", m.group(5), use[-1] if use else "none")
    for i, c in enumerate(before["copies"]):
        want(f"U-Boot's validity of {c['file']}", m.group(1 + 2 * i), int(c["valid"]))
m = re.search(r"pfx: wrote pfxenv\.(\w) PFX_SEQ=(\d+) BOOT_ORDER=(\w \w) A_LEFT=(\d) B_LEFT=(\d)", log)
if not m:
    errs.append("no 'pfx: wrote' line on the console")
else:
    want("copy U-Boot wrote", "pfxenv." + m.group(1), w["file"])
    want("PFX_SEQ U-Boot wrote", m.group(2), w["seq"])
    want("BOOT_ORDER U-Boot wrote", m.group(3), w["boot_order"])
    want("counts U-Boot wrote", f"{m.group(4)},{m.group(5)}", f'{w["a_left"]},{w["b_left"]}')
if nb["action"] == "boot":
    m = re.search(r"pfx: slot=(\w) left_before=(\d) left_after=(\d) partition=(\d)", log)
    if not m:
        errs.append("no 'pfx: slot=' line on the console")
    else:
        want("slot U-Boot chose", m.group(1), nb["slot"])
        want("attempts before", m.group(2), nb["left_before"])
        want("attempts after", m.group(3), nb["left_after"])
    part = {"A": "02", "B": "03"}[nb["slot"]]
    args = (f"console=ttyAMA0 pfx.test={nb['slot']} root=PARTUUID={diskid}-{part} "
            f"rauc.slot={nb['slot']}" + (" pfx.trial=1" if nb["trial"] else ""))
    m = re.search(r"pfx: bootargs=(.*)", log)
    want("bootargs", m.group(1) if m else None, args)
    if "Bad Linux ARM64 Image magic" not in log:
        errs.append("booti was not reached with the slot's kernel")
else:
    if "pfx: no slot has attempts left" not in log:
        errs.append("no 'no slot has attempts left' line on the console")
if "resetting ..." not in log:
    errs.append("the script did not reset")
# The copies on the FAT afterwards: the written one is the predicted bytes (its CRC),
# full size, and the newest; the other is untouched.
cb = {c["file"]: c for c in before["copies"]}
ca = {c["file"]: c for c in after["copies"]}
other = "pfxenv.a" if w["file"] == "pfxenv.b" else "pfxenv.b"
got = ca[w["file"]]
want(f"{w['file']} valid after the boot", got["valid"], True)
want(f"{w['file']} size after the boot", got["size"], 16384)
want(f"{w['file']} CRC (bytes) after the boot", got["crc32"], w["crc32"])
want("newest after the boot", after["newest"], w["file"])
want(f"{other} untouched", ca[other]["crc32"], cb[other]["crc32"])
if errs:
    print("; ".join(errs))
    sys.exit(1)
desc = (f"{nb['slot']} {nb['left_before']}->{nb['left_after']}" + (" trial" if nb["trial"] else "")
        if nb["action"] == "boot" else "reset both to 3")
print(f"{desc}, wrote {w['file']} PFX_SEQ={w['seq']}")
PY

# boot NAME KEY=VALUE...: predicts, boots once, checks. Expectations: slot=A|B|none,
# before=N, trial=0|1, file=a|b (the copy written), seq=N (its PFX_SEQ), use=a|b|none
# (the copy the state came from), order="A B"|"B A", left="A,B" (the counts written).
boot() {
  local name=$1; shift
  agent print --json > "$T/$name.before.json" || { fail "$name: bootenv print before the boot"; return; }
  put_env || { fail "$name: mcopy of the copies onto the FAT"; return; }
  local t0=$SECONDS rc
  if [ "$MACHINE" = virt ]; then
    dtb_for_boot || { fail "$name: the device tree for bootdelay 0: $(cat "$T/dumpdtb.log")"; return; }
    timeout 60 qemu-system-aarch64 -M virt "${QEMU_ARGS[@]}" -dtb "$T/virt.dtb" -serial "file:$T/$name.serial" \
      -monitor none -no-reboot > "$T/$name.qemu.log" 2>&1
    rc=$?
  else
    # The Pi 4's U-Boot prints on the second UART (the mini UART of its device tree).
    timeout 60 qemu-system-aarch64 -M raspi4b -kernel "$RPI_UBOOT" -dtb "$T/rpi.dtb" \
      -drive "file=$IMG,if=sd,format=raw" -display none -serial null -serial "file:$T/$name.serial" \
      -monitor none -no-reboot > "$T/$name.qemu.log" 2>&1
    rc=$?
  fi
  [ $rc = 124 ] && { fail "$name: QEMU did not end within 60 s (the script did not reset): $(grep -a 'pfx:' "$T/$name.serial" | tail -3)"; return; }
  get_env || { fail "$name: mcopy of the copies back from the FAT"; return; }
  agent print --json > "$T/$name.after.json" || { fail "$name: bootenv print after the boot"; return; }
  local out
  if out=$(python3 "$T/check.py" "$T/$name" "$DISKID" "$@"); then
    ok "$name: $out ($((SECONDS - t0)) s)"
  else
    fail "$name: $out (kept: PFX_BOOTENV_KEEP=1; log $T/$name.serial)"
  fi
}

rauc_check() { # rauc_check WHAT EXPECTED ARGS...: a get- call's answer
  local what=$1 want=$2; shift 2
  local got
  got=$(agent rauc "$@" 2>"$T/rauc.err")
  if [ "$got" = "$want" ]; then ok "rauc $*: $got ($what)"; else fail "rauc $*: got '$got', expected '$want' ($what): $(cat "$T/rauc.err")"; fi
}
rauc_set() { agent rauc "$@" 2>"$T/rauc.err" || fail "rauc $*: $(cat "$T/rauc.err")"; }

# A copy with these entries (a body without the final NUL) and a right CRC: hostile
# content U-Boot must still read the way crates/bootenv does.
craft() { python3 - "$1" "$2" <<'PY'
import struct, sys, zlib
body = sys.argv[2].encode("latin-1").decode("unicode_escape").encode("latin-1")
data = body + b"\0" * (16380 - len(body))
open(sys.argv[1], "wb").write(struct.pack("<I", zlib.crc32(data)) + data)
PY
}
garble() { python3 - "$1" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[10] ^= 0x20; open(p, "wb").write(b)
PY
}

# ---------------------------------------------------------------- bench
# `62-bootenv.sh bench`: QEMU start to the script's reset (U-Boot, distro boot, the script,
# booti refusing the fake kernel), U-Boot's own 2 s boot delay against bootdelay 0 from the
# device tree, side by side in one run, one attempt each. Guard: the boot reached booti.
if [ "${1:-}" = bench ]; then
  agent init > /dev/null || die "bootenv init"
  cell() { # cell NAME QEMU-ARGS...: sets took (s) or prints UNMEASURABLE
    put_env || { echo "$1: UNMEASURABLE: mcopy failed"; took=""; return; }
    local t0 t1; t0=$(date +%s.%N)
    timeout 60 qemu-system-aarch64 -M virt "${QEMU_ARGS[@]}" "${@:2}" -serial "file:$T/bench-$1.serial" \
      -monitor none -no-reboot > /dev/null 2>&1
    t1=$(date +%s.%N)
    if grep -aq "Bad Linux ARM64 Image magic" "$T/bench-$1.serial" && grep -aq "resetting ..." "$T/bench-$1.serial"; then
      took=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
    else
      echo "$1: UNMEASURABLE: the boot did not reach booti and the reset"; took=""
    fi
  }
  dtb_for_boot || die "the device tree: $(cat "$T/dumpdtb.log")"
  cell stock; stock=$took
  cell dtb0 -dtb "$T/virt.dtb"; dtb0=$took
  echo "BENCH: QEMU start -> reset after booti, U-Boot's default bootdelay 2: ${stock:-UNMEASURABLE} s"
  echo "BENCH: QEMU start -> reset after booti, bootdelay 0 from /config in the dtb: ${dtb0:-UNMEASURABLE} s"
  [ -n "$stock" ] && [ -n "$dtb0" ] && python3 -c "print(f'BENCH: ratio {$dtb0 / $stock:.2f}, saved {$stock - $dtb0:.2f} s')"
  echo "BENCH: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
  exit 0
fi

# ---------------------------------------------------------------- the cases
echo "# fresh image, RAUC trial, commit"
agent init > /dev/null || fail "bootenv init"
boot fresh slot=A before=3 trial=0 use=a file=b seq=2 order="A B" left=2,0
rauc_check "the booted slot" A get-primary
rauc_set set-primary B
rauc_check "after set-primary B" B get-primary
boot trial-B slot=B before=1 trial=1 file=b seq=4 order="B A" left=2,0
rauc_check "the trial spent its one attempt" bad get-state B
boot back-to-A slot=A before=2 trial=0 file=a seq=5 left=1,0
rauc_check "B's trial failed, A is primary again" A get-primary
rauc_set set-state A good
rauc_set set-primary B
boot trial-B-again slot=B before=1 trial=1 left=3,0
rauc_set set-state B good
rauc_check "committed" good get-state B
boot committed-B slot=B before=3 trial=0 left=3,2
boot committed-B-2 slot=B before=2 trial=0 left=3,1

echo "# torn and lost copies"
# The copy U-Boot just wrote, torn (garbled): the boot before it is repeated.
wrote=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["next_boot"]["write"]["file"])' "$T/committed-B-2.before.json")
garble "$ENV/$wrote"
boot torn-uboot-write slot=B before=2 trial=0 left=3,1
# The newest copy erased: the older one holds the state before the last write.
newest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["newest"])' "$T/torn-uboot-write.after.json")
head -c 16384 /dev/zero > "$ENV/$newest"
boot newest-erased slot=B before=2 trial=0 left=3,1
# The older copy erased: nothing lost.
newest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["newest"])' "$T/newest-erased.after.json")
older=pfxenv.a; [ "$newest" = pfxenv.a ] && older=pfxenv.b
head -c 16384 /dev/zero | tr '\0' '\377' > "$ENV/$older"
boot older-erased slot=B before=1 trial=1 left=3,0
# Both garbled: the documented fallback, A B with 3 each, written to pfxenv.a as PFX_SEQ 1.
garble "$ENV/pfxenv.a"; garble "$ENV/pfxenv.b"
boot both-garbled slot=A before=3 trial=0 use=none file=a seq=1 order="A B" left=2,3

echo "# no slot bootable"
rauc_set set-state A bad
rauc_set set-state B bad
boot none-bootable slot=none left=3,3 order="A B"
boot after-reset slot=A before=3 left=2,3

echo "# hostile copies with a right CRC (U-Boot's import rules)"
# a: blanks, a comment, first-wins, leading zeros, a two-digit count; b: an entry with a
# value and no name (U-Boot fails the whole import after taking PFX_SEQ=9).
craft "$ENV/pfxenv.a" ' \tPFX_SEQ=0000000007\0#PFX_SEQ=99\0BOOT_ORDER=B A\0BOOT_ORDER=A B\0BOOT_A_LEFT=10\0BOOT_B_LEFT=2'
craft "$ENV/pfxenv.b" 'PFX_SEQ=9\0=junk\0BOOT_ORDER=A B'
boot hostile-1 slot=B before=2 use=a file=b seq=8 order="B A" left=0,1
# a: an escaped digit, a count deleted then set (the delete wins); b: PFX_SEQ past 2^32-1.
craft "$ENV/pfxenv.a" 'PFX_SEQ=1\\2\0BOOT_ORDER=B\0BOOT_A_LEFT\0BOOT_A_LEFT=3\0BOOT_B_LEFT=\\3'
craft "$ENV/pfxenv.b" 'PFX_SEQ=4294967296\0BOOT_A_LEFT=3'
boot hostile-2 slot=B before=3 use=a file=b seq=13 order="A B" left=0,2
# A tie goes to pfxenv.a; numbers not one apart: the higher; carries across 9 digits.
craft "$ENV/pfxenv.a" 'BOOT_A_LEFT=1\0BOOT_B_LEFT=0\0BOOT_ORDER=A B\0PFX_SEQ=5'
craft "$ENV/pfxenv.b" 'BOOT_A_LEFT=0\0BOOT_B_LEFT=1\0BOOT_ORDER=B A\0PFX_SEQ=5'
boot seq-tie slot=A use=a file=b seq=6
craft "$ENV/pfxenv.a" 'BOOT_A_LEFT=1\0BOOT_B_LEFT=0\0BOOT_ORDER=A B\0PFX_SEQ=1999999999'
craft "$ENV/pfxenv.b" 'BOOT_A_LEFT=0\0BOOT_B_LEFT=1\0BOOT_ORDER=B A\0PFX_SEQ=12'
boot seq-carry slot=A use=a file=b seq=2000000000
craft "$ENV/pfxenv.a" 'BOOT_A_LEFT=1\0BOOT_B_LEFT=0\0BOOT_ORDER=A B\0PFX_SEQ=3'
craft "$ENV/pfxenv.b" 'BOOT_A_LEFT=0\0BOOT_B_LEFT=2\0BOOT_ORDER=B A\0PFX_SEQ=10'
boot seq-higher slot=B use=b file=a seq=11
# The wrap: 4294967295 + 1 is 0, and 0 is then newer than 4294967295.
craft "$ENV/pfxenv.a" 'BOOT_A_LEFT=3\0BOOT_B_LEFT=0\0BOOT_ORDER=A B\0PFX_SEQ=4294967295'
craft "$ENV/pfxenv.b" 'BOOT_A_LEFT=3\0BOOT_B_LEFT=0\0BOOT_ORDER=A B\0PFX_SEQ=4294967294'
boot seq-wrap slot=A before=3 use=a file=b seq=0
boot seq-after-wrap slot=A before=2 use=b file=a seq=1
# A copy of the wrong size is invalid to both; U-Boot's write restores the size.
head -c 8192 "$ENV/pfxenv.b" > "$T/short" && mv "$T/short" "$ENV/pfxenv.b"
boot short-copy slot=A before=1 trial=1 use=a file=b seq=2

echo "# the Pi 4's U-Boot (u-boot-rpi, rpi_arm64) on QEMU's raspi4b, from an SD card"
# Debian's u-boot-rpi is an arm64 package, and the Pi's device tree comes with the kernel
# (linux-image-arm64: /usr/lib/linux-image-*/broadcom/bcm2711-rpi-4-b.dtb), so neither is
# on an amd64 host by itself: PFX_BOOTENV_RPI=U-BOOT.BIN:DTB names them (the image build
# has both). bootdelay 0 the same way, from /config in the tree.
if [ -n "${PFX_BOOTENV_RPI:-}" ]; then
  RPI_UBOOT=${PFX_BOOTENV_RPI%%:*}
  rpi_dtb=${PFX_BOOTENV_RPI#*:}
  if [ -f "$RPI_UBOOT" ] && [ -f "$rpi_dtb" ] && cp "$rpi_dtb" "$T/rpi.dtb" \
    && fdtput -c "$T/rpi.dtb" /config && fdtput -t i "$T/rpi.dtb" /config bootdelay 0; then
    # An SD card's size must be a power of two.
    IMG=$T/sd.img; cp "$DISK" "$IMG"; truncate -s 64M "$IMG"; MACHINE=rpi4
    agent init --force > /dev/null || fail "bootenv init --force"
    boot rpi4-fresh slot=A before=3 trial=0 use=a file=b seq=2 left=2,0
    rauc_set set-primary B
    boot rpi4-trial-B slot=B before=1 trial=1 file=b seq=4 order="B A" left=2,0
    boot rpi4-back-to-A slot=A before=2 trial=0 file=a seq=5 left=1,0
    # The copy U-Boot just wrote (fatwrite to the SD card), torn: the boot is repeated.
    garble "$ENV/pfxenv.a"
    boot rpi4-torn slot=A before=2 trial=0 use=b file=a seq=5 left=1,0
  else
    fail "PFX_BOOTENV_RPI=$PFX_BOOTENV_RPI: need an existing u-boot.bin and a device tree, and fdtput on it"
  fi
else
  echo "skipped: the Pi 4 cases (set PFX_BOOTENV_RPI=/usr/lib/u-boot/rpi_arm64/u-boot.bin:.../bcm2711-rpi-4-b.dtb)"
fi

echo
finish 62-bootenv
