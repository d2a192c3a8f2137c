#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lab-mlx5-dkms.sh: runs INSIDE the lab host (lab_host.py --mlx5-dkms, which
# builds the modules of vdpa-allocator-mlx5-dkms for the lab kernel with the
# package's own build.sh: build-mlx5-dkms.sh) and prints TAP. What the
# package does to a Debian 6.12 host's modules (issue 29), as DKMS does it:
#   install  the three .ko files into /lib/modules/KREL/updates/dkms and
#            the modules.* files depmod -a writes with them there (dkms
#            install, DEST_MODULE_LOCATION=/updates/dkms; the same depmod
#            run on the build machine over the same tree: under TCG it
#            takes over two minutes here, build-mlx5-dkms.sh says why);
#            modprobe then loads the rebuilt mlx5_core, not Debian's, with
#            the running kernel's vermagic; mlx5_vdpa loads (Debian ships
#            none) and registers its auxiliary driver; both unload and
#            load again
#   remove   the files gone and modules.* as before the install (what
#            depmod -a writes for the tree as it was; dkms remove): Debian's
#            own mlx5_core loads again, and there is no mlx5_vdpa
# The module tree is the lab host's overlay (tmpfs upper layer): nothing
# here changes the cached tree. There is no ConnectX here: a pci/<VF> vdpa
# management device, which needs the NIC's firmware, is hardware's to show.
set -u

. "$(dirname "$0")/tap.sh"
krel=$(uname -r)
tree=/lib/modules/$krel
dkms=$tree/updates/dkms
src=${LAB_MLX5_DKMS:?LAB_MLX5_DKMS names the built modules (lab_host.py --mlx5-dkms)}
depmod_out=${LAB_MLX5_DKMS_DEPMOD:?LAB_MLX5_DKMS_DEPMOD names the modules.* files depmod writes with them}
before=/run/lab-mlx5-dkms.modules
echo "# kernel $krel"
# which build is loaded: a module built out of tree (M=, as DKMS builds)
# taints the kernel with O, and /sys/module/M/taint says so per module;
# Debian's own are in tree (and signed: no E either)
built() {
    t=$(cat "/sys/module/$1/taint" 2>/dev/null) || { echo "not loaded"; return; }
    case "$t" in *O*) echo "out of tree" ;; *) echo "in tree" ;; esac
}
unload() { modprobe -r mlx5_vdpa 2>/dev/null; modprobe -r mlx5_core; }

section "Debian's module"
debian_file=$(modinfo -n mlx5_core 2>&1)
case "$debian_file" in
"$tree/kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko"*) ok "mlx5_core is Debian's before the package: $debian_file" ;;
*) not_ok "mlx5_core is Debian's before the package: $debian_file" ;;
esac
debian_magic=$(modinfo -F vermagic mlx5_core)
refused "Debian's kernel has no mlx5_vdpa" "not found" modprobe -n mlx5_vdpa

section install
mkdir -p "$dkms"
cp "$src/mlx5_core.ko" "$src/mlx5_vdpa.ko" "$src/vringh.ko" "$dkms/"
mkdir -p "$before"
cp -a "$tree"/modules.* "$before/"
check "depmod's index with updates/dkms in place" cp "$depmod_out"/modules.* "$tree/"
for m in mlx5_core mlx5_vdpa; do
    eq "$m resolves to updates/dkms" "$dkms/$m.ko" "$(modinfo -n $m 2>&1)"
done
fact "vringh resolves to $(modinfo -n vringh 2>&1)"
for m in mlx5_core mlx5_vdpa vringh; do
    eq "$m's vermagic is the running kernel's (Debian's mlx5_core's)" "$debian_magic" "$(modinfo -F vermagic "$dkms/$m.ko")"
done
case "$debian_magic" in
"$krel "*) ok "that vermagic names the running kernel $krel" ;;
*) not_ok "that vermagic names the running kernel $krel: $debian_magic" ;;
esac

section load
check "modprobe mlx5_core" modprobe mlx5_core
eq "the loaded mlx5_core is the rebuilt one" "out of tree" "$(built mlx5_core)"
check "modprobe mlx5_vdpa" modprobe mlx5_vdpa
eq "the loaded mlx5_vdpa is the package's" "out of tree" "$(built mlx5_vdpa)"
# mlx5_vnet.c: auxiliary_driver "vnet", registered by module mlx5_vdpa;
# mlx5_core adds a "vnet" auxiliary device per VF only with the option on
check "mlx5_vdpa registered its auxiliary driver" test -d /sys/bus/auxiliary/drivers/mlx5_vdpa.vnet
fact "loaded: $(lsmod | awk '$1 ~ /^(mlx5_core|mlx5_vdpa|vringh|vdpa|vhost_iotlb)$/ { printf "%s ", $1 }')"
check "modprobe -r mlx5_vdpa mlx5_core" unload
check "both unloaded" sh -c '! [ -d /sys/module/mlx5_core ] && ! [ -d /sys/module/mlx5_vdpa ]'
check "modprobe mlx5_vdpa loads both again" modprobe mlx5_vdpa
eq "mlx5_core loaded again as the rebuilt one" "out of tree" "$(built mlx5_core)"
check "unloaded again" unload

section remove
rm -rf "$dkms"
check "depmod's index of the tree without updates/dkms in place" cp -a "$before"/modules.* "$tree/"
eq "mlx5_core resolves to Debian's again" "$debian_file" "$(modinfo -n mlx5_core 2>&1)"
check "modprobe mlx5_core" modprobe mlx5_core
eq "the loaded mlx5_core is Debian's" "in tree" "$(built mlx5_core)"
refused "no mlx5_vdpa after removal" "not found" modprobe -n mlx5_vdpa
modprobe -r mlx5_core 2>/dev/null

echo "1..$n"
[ "$failed" -eq 0 ]
