# pfx boot script: picks the root slot, counts its attempt, boots its own kernel.
# U-Boot hush, the same on the QEMU virt machine (u-boot-qemu) and on a Pi 4 (u-boot-rpi),
# U-Boot 2023.01. Compiled into boot.scr by the image build:
#   mkimage -A arm64 -T script -C none -d boot.cmd boot.scr
# Run by distro boot, which sets devtype, devnum and distro_bootpart (the FAT partition).
#
# The boot environment is two files on this FAT partition, pfxenv.a and pfxenv.b, 16384
# bytes each, U-Boot's binary env with an external CRC (env export -c / env import -c).
# The rules (crates/bootenv/README.md; that crate predicts this script's every decision):
# - A copy is valid when its size is 0x4000, its CRC is right, U-Boot imports it, and its
#   PFX_SEQ is 1 to 10 decimal digits of at most 4294967295.
# - Of two valid copies the newer is the one whose PFX_SEQ is the other's plus one
#   (modulo 2^32), else the higher, a tie going to pfxenv.a. Neither valid: BOOT_ORDER
#   "A B", both counts 3, and the write goes to pfxenv.a with PFX_SEQ 1.
# - BOOT_ORDER exactly "B A" puts B first; anything else reads as "A B". A count
#   (BOOT_A_LEFT, BOOT_B_LEFT) is its value when it is one decimal digit, else 0.
# - The first slot of the order with a count above 0 boots: its count goes down by one and
#   the state is written into the OTHER copy than the newest, PFX_SEQ + 1, before booting.
#   A power cut in that write spoils only the copy being written.
#   bootargs: <the slot's /boot/pfx-cmdline.txt> root=PARTUUID=<its partition>
#   rauc.slot=<A|B>, plus pfx.trial=1 when the count was 1 (its last attempt).
# - Neither slot has a count above 0: both go to 3 (order kept), written, then reset.
# - The kernel, initrd or command line does not load, or booti returns: reset (the count
#   is already spent, so repeated failures move on to the other slot).
#
# U-Boot's setexpr reads and prints hexadecimal; a decimal string read as hexadecimal is
# its BCD, so the script compares sequence numbers as 0x<digits>, and counts it up by
# adding 1 and carrying every nibble that reached 0xa. Counts are single digits, the same
# in both bases. Lines starting with "pfx:" on the console are for people and for the
# test suite (scripts/tests.d/62-bootenv.sh).

if test -z "${distro_bootpart}"; then setenv distro_bootpart 1; fi
# Scratch memory: 1 MiB past the script itself, below the kernel on both boards
# (qemu_arm64: scriptaddr 0x40200000, kernel_addr_r 0x40400000; rpi_arm64: scriptaddr
# 0x02400000, fdt_addr_r 0x02600000). env export clears its board's ENV_SIZE behind the
# buffer (256 KiB on qemu_arm64), so the write buffer comes first.
setexpr pfx_wbuf ${scriptaddr} + 0x100000
setexpr pfx_rbuf ${scriptaddr} + 0x180000
setexpr pfx_cbuf ${scriptaddr} + 0x1c0000
setenv pfx_re '^[0123456789][0123456789]?[0123456789]?[0123456789]?[0123456789]?[0123456789]?[0123456789]?[0123456789]?[0123456789]?[0123456789]?$'
setenv pfx_re1 '^[0123456789]$'

for c in a b; do
  setenv pfx_ok 0
  setenv PFX_SEQ
  setenv BOOT_ORDER
  setenv BOOT_A_LEFT
  setenv BOOT_B_LEFT
  setenv filesize
  if size ${devtype} ${devnum}:${distro_bootpart} pfxenv.${c}; then
    if test "${filesize}" = "4000"; then
      if load ${devtype} ${devnum}:${distro_bootpart} ${pfx_rbuf} pfxenv.${c} 0x4000; then
        if env import -d -c ${pfx_rbuf} 0x4000 PFX_SEQ BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT; then
          if setexpr pfx_t sub "${pfx_re}" y "${PFX_SEQ}"; then
            if test 0x${PFX_SEQ} -le 0x4294967295; then setenv pfx_ok 1; fi
          fi
        fi
      fi
    fi
  fi
  setenv pfx_${c}_ok ${pfx_ok}
  if test ${pfx_ok} = 1; then
    setenv pfx_${c}_seq ${PFX_SEQ}
    if test "${BOOT_ORDER}" = "B A"; then setenv pfx_${c}_first B; else setenv pfx_${c}_first A; fi
    if setexpr pfx_t sub "${pfx_re1}" y "${BOOT_A_LEFT}"; then setenv pfx_${c}_al ${BOOT_A_LEFT}; else setenv pfx_${c}_al 0; fi
    if setexpr pfx_t sub "${pfx_re1}" y "${BOOT_B_LEFT}"; then setenv pfx_${c}_bl ${BOOT_B_LEFT}; else setenv pfx_${c}_bl 0; fi
    # PFX_SEQ + 1 in decimal (BCD arithmetic, see above); 4294967295 + 1 wraps to 0.
    setexpr pfx_n ${PFX_SEQ} + 1
    for p in 1 10 100 1000 10000 100000 1000000 10000000 100000000 1000000000; do
      setexpr pfx_d ${pfx_n} / ${p}
      setexpr pfx_d ${pfx_d} % 10
      if test "${pfx_d}" = "a"; then
        setexpr pfx_d ${p} * 6
        setexpr pfx_n ${pfx_n} + ${pfx_d}
      fi
    done
    if test 0x${pfx_n} -gt 0x4294967295; then setenv pfx_n 0; fi
    setenv pfx_${c}_next ${pfx_n}
  fi
done
setenv PFX_SEQ
setenv BOOT_ORDER
setenv BOOT_A_LEFT
setenv BOOT_B_LEFT

setenv pfx_use none
if test ${pfx_a_ok} = 1; then setenv pfx_use a; fi
if test ${pfx_b_ok} = 1; then
  setenv pfx_use b
  if test ${pfx_a_ok} = 1; then
    if test 0x${pfx_b_seq} -eq 0x${pfx_a_next}; then
      setenv pfx_use b
    elif test 0x${pfx_a_seq} -eq 0x${pfx_b_next}; then
      setenv pfx_use a
    elif test 0x${pfx_a_seq} -ge 0x${pfx_b_seq}; then
      setenv pfx_use a
    fi
  fi
fi
if test ${pfx_use} = a; then
  setenv pfx_first ${pfx_a_first}; setenv pfx_al ${pfx_a_al}; setenv pfx_bl ${pfx_a_bl}
  setenv pfx_next ${pfx_a_next}; setenv pfx_wfile b
elif test ${pfx_use} = b; then
  setenv pfx_first ${pfx_b_first}; setenv pfx_al ${pfx_b_al}; setenv pfx_bl ${pfx_b_bl}
  setenv pfx_next ${pfx_b_next}; setenv pfx_wfile a
else
  setenv pfx_first A; setenv pfx_al 3; setenv pfx_bl 3
  setenv pfx_next 1; setenv pfx_wfile a
fi
echo "pfx: env a=${pfx_a_ok}:${pfx_a_seq} b=${pfx_b_ok}:${pfx_b_seq} use=${pfx_use} first=${pfx_first} A_LEFT=${pfx_al} B_LEFT=${pfx_bl}"

if test ${pfx_first} = B; then setenv pfx_second A; else setenv pfx_second B; fi
setenv pfx_slot none
for s in ${pfx_first} ${pfx_second}; do
  if test ${pfx_slot} = none; then
    if test ${s} = A; then setenv pfx_l ${pfx_al}; else setenv pfx_l ${pfx_bl}; fi
    if test ${pfx_l} -gt 0; then setenv pfx_slot ${s}; setenv pfx_before ${pfx_l}; fi
  fi
done

if test ${pfx_slot} = none; then
  setenv pfx_al 3
  setenv pfx_bl 3
else
  setexpr pfx_after ${pfx_before} - 1
  if test ${pfx_slot} = A; then
    setenv pfx_al ${pfx_after}; setenv pfx_part 2
  else
    setenv pfx_bl ${pfx_after}; setenv pfx_part 3
  fi
fi

setenv PFX_SEQ ${pfx_next}
if test ${pfx_first} = B; then setenv BOOT_ORDER "B A"; else setenv BOOT_ORDER "A B"; fi
setenv BOOT_A_LEFT ${pfx_al}
setenv BOOT_B_LEFT ${pfx_bl}
setenv pfx_written 0
if env export -c -s 0x4000 ${pfx_wbuf} BOOT_A_LEFT BOOT_B_LEFT BOOT_ORDER PFX_SEQ; then
  if fatwrite ${devtype} ${devnum}:${distro_bootpart} ${pfx_wbuf} pfxenv.${pfx_wfile} 0x4000; then
    setenv pfx_written 1
  fi
fi
if test ${pfx_written} = 1; then
  echo "pfx: wrote pfxenv.${pfx_wfile} PFX_SEQ=${pfx_next} BOOT_ORDER=${BOOT_ORDER} A_LEFT=${pfx_al} B_LEFT=${pfx_bl}"
else
  echo "pfx: WARNING: could not write pfxenv.${pfx_wfile}: this attempt is not counted"
fi

if test ${pfx_slot} = none; then
  echo "pfx: no slot has attempts left: both reset to 3; resetting"
  reset
fi

if test ${pfx_before} = 1; then setenv pfx_trial " pfx.trial=1"; else setenv pfx_trial; fi
echo "pfx: slot=${pfx_slot} left_before=${pfx_before} left_after=${pfx_after} partition=${pfx_part}"
setenv pfx_loaded 0
if load ${devtype} ${devnum}:${pfx_part} ${pfx_cbuf} /boot/pfx-cmdline.txt 0x1000; then
  # NUL-terminate the line and drop its line end (LF, CR LF).
  setexpr pfx_e ${pfx_cbuf} + ${filesize}
  mw.b ${pfx_e} 0 1
  for i in 1 2; do
    if test ${pfx_e} != ${pfx_cbuf}; then
      setexpr pfx_e ${pfx_e} - 1
      setexpr.b pfx_ch *${pfx_e}
      if test ${pfx_ch} = a || test ${pfx_ch} = d; then mw.b ${pfx_e} 0 1; else setenv pfx_e ${pfx_cbuf}; fi
    fi
  done
  setexpr.s pfx_cmdline *${pfx_cbuf}
  if part uuid ${devtype} ${devnum}:${pfx_part} pfx_uuid; then
    if load ${devtype} ${devnum}:${pfx_part} ${ramdisk_addr_r} /boot/initrd.img; then
      setenv pfx_rdsize ${filesize}
      if load ${devtype} ${devnum}:${pfx_part} ${kernel_addr_r} /boot/vmlinuz; then
        setenv pfx_loaded 1
        # A compressed kernel (Debian's vmlinuz is gzip) is unpacked by booti through
        # kernel_comp_addr_r; 64 MiB past the initrd's start unless the board set one.
        setenv kernel_comp_size ${filesize}
        if test -z "${kernel_comp_addr_r}"; then setexpr kernel_comp_addr_r ${ramdisk_addr_r} + 0x4000000; fi
      fi
    fi
  fi
fi
if test ${pfx_loaded} = 1; then
  setenv bootargs "${pfx_cmdline} root=PARTUUID=${pfx_uuid} rauc.slot=${pfx_slot}${pfx_trial}"
  echo "pfx: bootargs=${bootargs}"
  booti ${kernel_addr_r} ${ramdisk_addr_r}:${pfx_rdsize} ${fdtcontroladdr}
  echo "pfx: booti of slot ${pfx_slot} returned; resetting"
else
  echo "pfx: slot ${pfx_slot} (partition ${pfx_part}) lacks /boot/vmlinuz, /boot/initrd.img or /boot/pfx-cmdline.txt; resetting"
fi
reset
