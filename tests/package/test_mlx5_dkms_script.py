#!/usr/bin/python3
"""contrib/mlx5-dkms/build.sh, the script DKMS runs to build
vdpa-allocator-mlx5: what it refuses, each with one line and nothing
built. No kernel source is needed: every refusal comes before make (the
build itself is proven against the lab kernel's headers by
lab-mlx5-dkms: tests/lab/build-mlx5-dkms.sh and lab-mlx5-dkms.sh)."""

import os
import subprocess
import tempfile
import unittest

from vatest.paths import SRCDIR as SRC

SCRIPT = os.path.join(SRC, "contrib", "mlx5-dkms", "build.sh")
KREL = "6.12.117+deb12-amd64"
CONFIG = """CONFIG_CC_VERSION_TEXT="x86_64-linux-gnu-gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0"
CONFIG_MLX5_CORE=m
CONFIG_MLX5_CORE_EN=y
# CONFIG_MLX5_VDPA_NET is not set
CONFIG_VDPA=m
CONFIG_VHOST_IOTLB=m
"""


class Refusals(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="va-mlx5-dkms-")
        self.dir = self.tmp.name
        self.headers = os.path.join(self.dir, "headers")
        os.makedirs(self.headers)
        for name in ["Makefile", "Module.symvers"]:
            open(os.path.join(self.headers, name), "w").close()
        self.write_config(CONFIG)
        self.build = os.path.join(self.dir, "build")
        os.makedirs(self.build)
        self.tarball = os.path.join(self.dir, "linux-source-6.12.tar.xz")
        open(self.tarball, "w").close()
        self.env = {"PATH": os.environ["PATH"], "VA_MLX5_KERNEL_VERSION": "6.12.117-1~deb12u1",
                    "VA_MLX5_SOURCE_VERSION": "6.12.117-1~deb12u1", "VA_MLX5_SOURCE_TARBALL": self.tarball,
                    "VA_MLX5_KERNEL_CONFIG": os.path.join(self.dir, "config-" + KREL)}

    def tearDown(self):
        self.tmp.cleanup()

    def write_config(self, text, headers_text=None):
        with open(os.path.join(self.dir, "config-" + KREL), "w") as f:
            f.write(text)
        with open(os.path.join(self.headers, ".config"), "w") as f:
            f.write(text if headers_text is None else headers_text)

    def refused(self, krel=KREL, **env):
        e = dict(self.env)
        e.update(env)
        r = subprocess.run(["sh", SCRIPT, krel, self.headers], cwd=self.build, env=e, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("vdpa-allocator-mlx5: "), lines[0])
        # nothing unpacked, nothing built
        self.assertFalse(os.path.exists(os.path.join(self.build, "src")))
        self.assertFalse(os.path.exists(os.path.join(self.build, "out")))
        return lines[0]

    def test_other_series(self):
        for krel in ["6.1.0-28-amd64", "6.16.3+deb13-amd64", "5.10.0-30-amd64"]:
            self.assertIn("is not 6.12.x", self.refused(krel))

    def test_no_headers(self):
        os.remove(os.path.join(self.headers, "Module.symvers"))
        self.assertIn("apt install linux-headers-" + KREL, self.refused())

    def test_headers_of_another_build(self):
        self.write_config(CONFIG, CONFIG.replace("CONFIG_MLX5_CORE_EN=y", "CONFIG_MLX5_CORE_EN=n"))
        self.assertIn("differs from", self.refused())

    def test_headers_with_debians_build_lines(self):
        # linux-headers-6.12.118+deb12-amd64's .config against its image's
        # /boot/config: these four lines more, and nothing else
        build_lines = ('CONFIG_BUILD_SALT="%s"\nCONFIG_MODULE_SIG_ALL=y\nCONFIG_MODULE_SIG_KEY="output/signing_key.pem"\n'
                       'CONFIG_SYSTEM_TRUSTED_KEYS=""\n' % KREL)
        self.write_config(CONFIG, CONFIG + build_lines)
        # past the config check, to the next refusal
        self.assertIn("linux-source-6.12 is 6.12.110", self.refused(VA_MLX5_SOURCE_VERSION="6.12.110-1~deb12u1"))
        self.write_config(CONFIG, CONFIG + build_lines + "CONFIG_MLX5_EN_IPSEC=y\n")
        self.assertIn("differs from", self.refused())

    def test_mlx5_core_built_in(self):
        self.write_config(CONFIG.replace("CONFIG_MLX5_CORE=m", "CONFIG_MLX5_CORE=y"))
        self.assertIn("not a module", self.refused())

    def test_option_already_set(self):
        self.write_config(CONFIG.replace("# CONFIG_MLX5_VDPA_NET is not set", "CONFIG_MLX5_VDPA_NET=m"))
        self.assertIn("CONFIG_MLX5_VDPA_NET=m already", self.refused())

    def test_no_vdpa_core(self):
        self.write_config(CONFIG.replace("CONFIG_VDPA=m\n", ""))
        self.assertIn("lacks CONFIG_VDPA", self.refused())

    def test_source_of_another_version(self):
        line = self.refused(VA_MLX5_SOURCE_VERSION="6.12.110-1~deb12u1")
        self.assertIn("is Debian's linux 6.12.117-1~deb12u1 but linux-source-6.12 is 6.12.110-1~deb12u1", line)
        self.assertIn("apt install linux-source-6.12=6.12.117-1~deb12u1", line)

    def test_source_not_installed(self):
        os.remove(self.tarball)
        self.assertIn("linux-source-6.12", self.refused())


if __name__ == "__main__":
    unittest.main(verbosity=2)
