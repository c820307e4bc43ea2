"""Checks a built wheel against its own tag (run by tests/platforms/wheels.sh):

- it holds exactly one native library, the extension module, named as its
  platform names one (`.abi3.so` on Linux and macOS, `.pyd` on Windows);
- that library is built for the tag's platform and machine: ELF for
  Linux, Mach-O for macOS, PE for Windows, with the tag's architecture;
- it links only what the platform provides:
  - macOS: system libraries and frameworks only (`/usr/lib/`,
    `/System/Library/`), each imported symbol bound to one of them but
    Python's, and its minimum OS version is at most the tag's;
  - Windows: `python3.dll` (the stable ABI, never a versioned
    `python3X.dll`), system DLLs and the C runtime every Windows has,
    and no MinGW runtime DLL (`libgcc_s_*`, `libwinpthread-1`) that a
    user's machine lacks;
  - Linux: auditwheel's policy check (check.sh runs it) owns that.

Usage: inspect_wheel.py WHEEL... ; exits non-zero with the reasons.
"""

import re
import sys
import tempfile
import zipfile

import lief

lief.logging.disable()

MACHINES = {
    "x86_64": {"elf": "X86_64", "macho": "X86_64", "pe": "AMD64"},
    "aarch64": {"elf": "AARCH64", "macho": "ARM64", "pe": "ARM64"},
    "arm64": {"elf": "AARCH64", "macho": "ARM64", "pe": "ARM64"},
    "amd64": {"elf": "X86_64", "macho": "X86_64", "pe": "AMD64"},
}

# What every supported Windows (10 and later) has in System32, and the
# C runtime that Rust's windows-gnu target links (msvcrt.dll) or the
# Universal CRT's API sets (api-ms-win-crt-*, windows-msvc).
WINDOWS_SYSTEM = {
    "kernel32.dll",
    "ntdll.dll",
    "advapi32.dll",
    "bcrypt.dll",
    "bcryptprimitives.dll",
    "crypt32.dll",
    "ncrypt.dll",
    "secur32.dll",
    "shell32.dll",
    "ole32.dll",
    "oleaut32.dll",
    "user32.dll",
    "userenv.dll",
    "ws2_32.dll",
    "iphlpapi.dll",
    "msvcrt.dll",
    "ucrtbase.dll",
    "vcruntime140.dll",
    "synchronization.dll",
}


def platform_of(tag: str) -> tuple[str, str]:
    """(os, machine) of a wheel's platform tag."""
    if tag.startswith(("manylinux", "musllinux")):
        return "linux", re.sub(r"^(manylinux2014|(many|musl)linux_\d+_\d+)_", "", tag)
    if tag.startswith("macosx_"):
        return "macos", tag.split("_", 3)[3]
    if tag.startswith("win_"):
        return "windows", tag[4:]
    raise ValueError(f"unknown platform tag {tag}")


def macos_min(tag: str) -> tuple[int, int]:
    _, major, minor, _ = tag.split("_", 3)
    return int(major), int(minor)


def check_macho(binary: "lief.MachO.Binary", tag: str, problems: list[str]) -> None:
    for lib in binary.libraries:
        if lib.command == lief.MachO.LoadCommand.TYPE.ID_DYLIB:
            continue  # its own name
        if not lib.name.startswith(("/usr/lib/", "/System/Library/")):
            problems.append(f"links {lib.name}, which is not a system library")
    strays = [s.name for s in binary.imported_symbols if s.library_ordinal <= 0 and not s.name.startswith(("_Py", "__Py"))]
    if strays:
        problems.append(f"symbols bound to no library (a flat lookup at run time): {strays[:10]}")
    minos = None
    if binary.has_build_version:
        minos = tuple(binary.build_version.minos[:2])
    elif binary.has_version_min:
        minos = tuple(binary.version_min.version[:2])
    if minos is None:
        problems.append("no minimum macOS version (LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX)")
    elif minos > macos_min(tag):
        problems.append(f"needs macOS {minos}, but the tag says {macos_min(tag)}")


def check_pe(binary: "lief.PE.Binary", problems: list[str]) -> None:
    names = {imp.name.lower() for imp in binary.imports}
    if "python3.dll" not in names:
        problems.append(f"does not import python3.dll (imports {sorted(names)})")
    for name in sorted(names - {"python3.dll"}):
        if name.startswith("api-ms-win-") or name in WINDOWS_SYSTEM:
            continue
        problems.append(f"imports {name}, which Windows does not provide")


def check(path: str) -> list[str]:
    tag = path.rsplit("-", 1)[1].removesuffix(".whl")
    os_name, machine = platform_of(tag.split(".")[0])
    if machine not in MACHINES:
        return [f"unknown machine {machine} in {tag} (one wheel per machine: no universal2)"]
    problems: list[str] = []
    with zipfile.ZipFile(path) as wheel:
        native = [n for n in wheel.namelist() if re.search(r"\.(so|pyd|dll|dylib)(\.|$)", n)]
        suffix = ".pyd" if os_name == "windows" else ".abi3.so"
        if len(native) != 1 or not native[0].endswith(suffix):
            return [f"native libraries {native}; want one *{suffix}"]
        with tempfile.NamedTemporaryFile(suffix=suffix) as f:
            f.write(wheel.read(native[0]))
            f.flush()
            binary = lief.parse(f.name)
    if binary is None:
        return [f"{native[0]} is not an executable format lief reads"]
    fmt = {"linux": lief.Binary.FORMATS.ELF, "macos": lief.Binary.FORMATS.MACHO, "windows": lief.Binary.FORMATS.PE}
    if binary.format != fmt[os_name]:
        return [f"{native[0]} is {binary.format}, not {fmt[os_name]}"]
    want = MACHINES[machine]
    if os_name == "linux":
        got = binary.header.machine_type.name
        if got != want["elf"]:
            problems.append(f"ELF machine {got}, the tag says {machine}")
    elif os_name == "macos":
        got = binary.header.cpu_type.name
        if got != want["macho"]:
            problems.append(f"Mach-O CPU {got}, the tag says {machine}")
        check_macho(binary, tag.split(".")[0], problems)
    else:
        got = binary.header.machine.name
        if got != want["pe"]:
            problems.append(f"PE machine {got}, the tag says {machine}")
        check_pe(binary, problems)
    return problems


def main() -> None:
    failed = False
    for path in sys.argv[1:]:
        problems = check(path)
        name = path.rsplit("/", 1)[-1]
        if problems:
            failed = True
            for p in problems:
                print(f"{name}: {p}")
        else:
            print(f"{name}: ok")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
