#!/usr/bin/env bash
# Boot bench (docs/PERFORMANCE.md, "Image"; docs/perf/image.md): boots vm-arm64 images in
# the image suite's VM (scripts/lib/vm.sh: TCG, cortex-a72, 2 vCPU, 1 GiB, e1000), each
# boot a first boot (-snapshot) on a copy 1 GiB bigger than the image, as the suite's first
# boot. Per boot it prints qemu start -> /profile and -> first frame, the guest's
# `systemd-analyze time`, `critical-chain pfx-player.service`, `blame | head` and the
# kernel's initramfs unpack time. With two images it boots them alternately (A B A B ...)
# and prints the ratio B/A of the medians: the shared host's load drifts, so only a
# side-by-side ratio says whether B is faster.
#
#   bench/boot.sh [-n N] A.img [B.img]     N boots of each (default 3); IMG.manifest.json
#                                          must lie beside each image (pfx-image build)
#   bench/boot.sh [-n N] --uboot IMG        the same image both ways, alternately: A with
#                                          qemu -kernel (the image's kernel, initrd and
#                                          cmdline.txt from its FAT), B through U-Boot
#                                          (-bios u-boot.bin running boot.scr, the path a
#                                          unit takes): what the A/B boot costs
#   bench/boot.sh build TREE OUT.img [pfx-image build args...]
#                                          builds the suite's vm-arm64 image with the
#                                          pfx-image of checkout TREE (A = main's tree)
#
# Env: PFX_CACHE (as for pfx-image); PFX_BOOT_PROBE=1 also times `pfx-player --version`
# and `pfx-player run --check` inside each booted guest. Needs root (debugfs, qemu).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../scripts/lib/check.sh
. "$top/scripts/lib/check.sh"
fail() { die "$*"; } # each step needs the one before
need_root "qemu, debugfs"

# shellcheck source=../scripts/lib/vm.sh
. "$top/scripts/lib/vm.sh"

if [ "${1:-}" = build ]; then
  tree=$(cd "$2" && pwd); out=$3; shift 3
  yaml=$(mktemp /tmp/pfx-boot-bench.XXXXXX.yaml)
  ssh-keygen -q -t ed25519 -N '' -C pfx-boot-bench -f "$yaml.id" <<< y > /dev/null
  vm_image_yaml "$tree" "$yaml.id.pub" > "$yaml"
  (cd "$tree" && cargo build -q --locked -p pfx-image)
  rc=0; "$tree/target/debug/pfx-image" build "$yaml" -o "$out" --workspace "$tree" "$@" || rc=$?
  rm -f "$yaml" "$yaml.id" "$yaml.id.pub"
  exit $rc
fi

n=3
if [ "${1:-}" = -n ]; then n=$2; shift 2; fi
uboot_b=0
if [ "${1:-}" = --uboot ]; then uboot_b=1; shift; [ $# = 1 ] || { sed -n '2,24p' "$0"; exit 2; }; set -- "$1" "$1"; fi
[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '2,18p' "$0"; exit 2; }
vm_work=$(mktemp -d /var/tmp/pfx-boot-bench.XXXXXX)
qemu_pid=""
cleanup() {
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then kill "$qemu_pid"; wait "$qemu_pid" 2>/dev/null || true; fi
  rm -rf "$vm_work"
}
trap cleanup EXIT
vm_poll=0.25
vm_key=$vm_work/inspect
ssh-keygen -q -t ed25519 -N '' -C pfx-boot-bench-inspect -f "$vm_key"

names=(A B)
imgs=("$@")
for i in "${!imgs[@]}"; do
  img=${imgs[$i]} d=$vm_work/${names[$i]}
  [ -f "$img" ] && [ -f "$img.manifest.json" ] || fail "${names[$i]}: $img or its manifest $img.manifest.json is missing (build it with: bench/boot.sh build TREE OUT.img)"
  mkdir -p "$d"
  cp --sparse=always "$img" "$d/boot.img"
  vm_inject_inspect "$d/boot.img" "$img.manifest.json" "$vm_key.pub" "$d/inject"
  truncate -s +1G "$d/boot.img"
  vm_boot_files "$img" "$img.manifest.json" "$d"
  echo "${names[$i]}: $img ($(du -m --apparent-size "$img" | cut -f1) MiB), kernel $vm_kfile, initrd $vm_ifile $(stat -c %s "$d/initrd") bytes ($(od -An -tx1 -N2 "$d/initrd" | tr -d ' ') first), cmdline: $vm_cmdline"
done
echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), date $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$top" rev-parse --short HEAD)"

results=$vm_work/results
: > "$results"
for round in $(seq 1 "$n"); do
  for i in "${!imgs[@]}"; do
    name=${names[$i]} d=$vm_work/${names[$i]}
    vm_disk=$d/boot.img vm_kernel=$d/vmlinuz vm_initrd=$d/initrd
    vm_cmdline=$(tr '\n' ' ' < "$d/cmdline.txt")
    vm_boot=kernel
    [ "$uboot_b" = 1 ] && [ "$name" = B ] && vm_boot=uboot
    ssh_opts=(-o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=no
              -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)
    vm_ports
    load=$(cut -d' ' -f1 /proc/loadavg)
    start_vm "$d/serial-$round.log"
    wait_profile "$d/serial-$round.log"
    wait_frame
    echo "== $name ($vm_boot) boot $round (load $load): /profile ${profile_s} s, first frame ${frame_s} s after qemu start (seen by the poll at ${frame_seen_s} s)"
    t=""
    for _ in $(seq 1 60); do
      t=$(vm systemd-analyze time 2>/dev/null | head -1) && [ -n "$t" ] && break
      sleep 2
    done
    echo "  $t"
    vm "dmesg | grep -E 'Trying to unpack|Freeing initrd|Run /init|EXT4-fs \(vda2\)' | head -5" 2>/dev/null | sed 's/^/  dmesg: /' || true
    vm systemd-analyze critical-chain --no-pager pfx-player.service 2>&1 | sed 's/^/  /' || true
    vm systemd-analyze critical-chain --no-pager var-lib-pfx.mount 2>&1 | tail -n +3 | sed 's/^/  data: /' || true
    vm systemd-analyze blame --no-pager 2>&1 | head -12 | sed 's/^/  blame: /' || true
    if [ "${PFX_BOOT_PROBE:-0}" = 1 ]; then
      # The player binary's own costs under TCG, after the boot (page cache warm).
      vm 'for c in "--version" "run --check --config /etc/pfx/show.yaml --store /var/lib/pfx"; do s=$(date +%s%N); /usr/bin/pfx-player $c > /dev/null 2>&1; echo "probe: pfx-player $c: $(( ($(date +%s%N) - s) / 1000000 )) ms"; done' 2>/dev/null | sed 's/^/  /' || true
    fi
    vm "journalctl -b -o short-monotonic --no-pager -u pfx-player -u 'pfx-eth-no-pause@*' | head -20" 2>/dev/null | sed 's/^/  journal: /' || true
    echo "$name $profile_s $frame_s" >> "$results"
    # -snapshot: nothing of this boot stays on the copy; no clean shutdown needed.
    kill "$qemu_pid"; wait "$qemu_pid" 2>/dev/null || true; qemu_pid=""
  done
done

python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = {}
for name in ("A", "B"):
    p = [float(r[1]) for r in rows if r[0] == name]
    f = [float(r[2]) for r in rows if r[0] == name]
    if p:
        med[name] = (statistics.median(p), statistics.median(f))
        print("%s: %d boots, /profile median %.1f s (%s), first frame median %.1f s (%s)"
              % (name, len(p), med[name][0], " ".join(r[1] for r in rows if r[0] == name),
                 med[name][1], " ".join(r[2] for r in rows if r[0] == name)))
if "B" in med:
    print("ratio B/A of the medians: /profile %.2f, first frame %.2f"
          % (med["B"][0] / med["A"][0], med["B"][1] / med["A"][1]))
PY
