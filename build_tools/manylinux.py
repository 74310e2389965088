"""The manylinux platform tag an op library honestly qualifies for.

A manylinux_2_X wheel promises to run on any Linux with glibc >= 2.X and that
era's libstdc++ (PEP 600). What our `.so` needs is written in it: the versioned
symbols it imports (GLIBC_2.14, GLIBCXX_3.4.29, CXXABI_1.3.9, GCC_4.2.0 ...) and
the libraries it links (DT_NEEDED). This module reads both straight from the ELF
file (no readelf, no auditwheel) and maps them to the oldest manylinux policy that
provides them, using the x86_64 symbol-version limits of auditwheel's policies.

The tag is never older than the TensorFlow wheel's own (TF 2.21: manylinux_2_27),
since the wheel is useless where TensorFlow cannot be installed. Libraries outside
the manylinux allow-list are refused, except TensorFlow's own framework library,
which the `tensorflow` dependency provides (as for every TF custom-op wheel).

    python build_tools/manylinux.py LIBRARY.so    # prints the tag and why
"""
import re
import struct
import sys

# Libraries any manylinux system provides (auditwheel's lib_whitelist), plus TF's.
ALLOWED_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
    "libgcc_s.so.1", "libstdc++.so.6", "libatomic.so.1", "ld-linux-x86-64.so.2",
    "libmvec.so.1", "libanl.so.1", "libresolv.so.2", "libutil.so.1", "libz.so.1",
}
# The tensorflow wheel the package requires ships both (the XLA kernels need _cc).
PROVIDED_BY_TENSORFLOW = {"libtensorflow_framework.so.2", "libtensorflow_cc.so.2"}

# x86_64: (glibc minor of the policy, newest GLIBCXX_3.4.N, CXXABI_1.3.N, GCC_x.y.z).
# From auditwheel's manylinux policies; a version newer than the last row has no
# known policy, and then the library gets no manylinux tag at all.
POLICIES = (
    (17, 19, 7, (4, 8, 0)),
    (24, 22, 10, (4, 8, 0)),
    (27, 24, 11, (7, 0, 0)),
    (28, 24, 11, (7, 0, 0)),
    (31, 28, 12, (7, 0, 0)),
    (34, 29, 13, (7, 0, 0)),
    (35, 30, 13, (12, 0, 0)),
)

_SHT_GNU_VERNEED = 0x6FFFFFFE
_SHT_DYNAMIC = 6
_DT_NEEDED = 1


def _read_elf(path):
    """(needed libraries, {library: [version names]}) of a 64-bit little-endian ELF."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(shnum):
        (_, sh_type, _, _, sh_offset, sh_size, sh_link, sh_info, _, _) = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_info))

    def string(table, offset):
        start = sections[table][1] + offset
        return data[start:data.index(b"\0", start)].decode()

    needed, versions = [], {}
    for sh_type, offset, size, link, info in sections:
        if sh_type == _SHT_DYNAMIC:
            for pos in range(offset, offset + size, 16):
                tag, value = struct.unpack_from("<qQ", data, pos)
                if tag == _DT_NEEDED:
                    needed.append(string(link, value))
        elif sh_type == _SHT_GNU_VERNEED:
            pos = offset
            for _ in range(info):  # sh_info: number of Verneed entries
                _, count, file_off, aux, nxt = struct.unpack_from("<HHIII", data, pos)
                names = versions.setdefault(string(link, file_off), [])
                apos = pos + aux
                for _ in range(count):
                    _, _, _, name_off, anext = struct.unpack_from("<IHHII", data, apos)
                    names.append(string(link, name_off))
                    apos += anext
                pos += nxt
    return needed, versions


def _numbers(version):
    return tuple(int(x) for x in version.split("."))


def required_glibc(path):
    """(glibc minor version this library needs, [reasons]); the minor is None when
    no manylinux policy covers it (the reasons say why)."""
    needed, versions = _read_elf(path)
    reasons, minimum = [], 17
    for lib in needed:
        if lib not in ALLOWED_LIBRARIES and lib not in PROVIDED_BY_TENSORFLOW:
            return None, [f"links {lib}, which no manylinux policy provides"]
    for lib, names in sorted(versions.items()):
        if lib in PROVIDED_BY_TENSORFLOW:
            continue
        for name in names:
            m = re.fullmatch(r"(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)", name)
            if not m:
                continue  # e.g. CXXABI_TM_1, FLOAT128: in every policy since 2_17
            kind, number = m.group(1), _numbers(m.group(2))
            if kind == "GLIBC":
                need = number[1] if len(number) > 1 else 0
            else:
                need = None
                for glibc, glibcxx, cxxabi, gcc in POLICIES:
                    limit = {"GLIBCXX": (3, 4, glibcxx), "CXXABI": (1, 3, cxxabi),
                             "GCC": gcc}[kind]
                    if number <= limit:
                        need = glibc
                        break
                if need is None:
                    return None, [f"{name} (from {lib}) is newer than every known policy"]
            if need > minimum:
                minimum = need
                reasons.append(f"{name} from {lib} needs manylinux_2_{need}")
    return minimum, reasons


def tensorflow_glibc():
    """The glibc minor of the installed TensorFlow wheel's manylinux tag, or None."""
    try:
        from importlib import metadata
        wheel = metadata.distribution("tensorflow").read_text("WHEEL") or ""
    except Exception:  # pylint: disable=broad-except
        return None
    minors = [int(m) for m in re.findall(r"^Tag: .*-manylinux_2_(\d+)_x86_64$", wheel, re.M)]
    minors += [17 for _ in re.findall(r"^Tag: .*-manylinux2014_x86_64$", wheel, re.M)]
    return min(minors) if minors else None


def platform_tag(path, machine="x86_64"):
    """('manylinux_2_X_x86_64' or None, [reasons])."""
    if machine != "x86_64":
        return None, [f"no policy table for {machine}"]
    minor, reasons = required_glibc(path)
    if minor is None:
        return None, reasons
    tf_minor = tensorflow_glibc()
    if tf_minor and tf_minor > minor:
        minor = tf_minor
        reasons.append(f"the tensorflow wheel itself is manylinux_2_{tf_minor}")
    return f"manylinux_2_{minor}_{machine}", reasons


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    tag, why = platform_tag(sys.argv[1])
    print(tag or "linux (no manylinux tag)")
    for line in why:
        print("  " + line)
