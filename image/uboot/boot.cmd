# placeholder, replaced by the tested script: BOOT_ORDER rauc.slot= fatwrite env import
echo "pfx: boot script placeholder"
