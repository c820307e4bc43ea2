"""The part of a macOS SDK that the extension links, as text stubs (run by
tests/platforms/wheels.sh): no SDK can be had here, and zig ships only
libSystem's stubs. The extension also links two frameworks:
Security (rustls-platform-verifier, through object_store's HTTP client)
and CoreFoundation (that, and iana-time-zone, through Arrow's chrono).

A stub (`NAME.framework/NAME.tbd`, TAPI v4) names the framework's install
name and the symbols it exports; the linker records, for each symbol, the
framework it comes from (two-level namespace), as it does from a real
SDK's stubs. The symbols are the ones the extension leaves unbound:

    apple_sdk.py SDKROOT              stubs that export nothing (pass 1)
    apple_sdk.py SDKROOT EXTENSION    stubs that export what EXTENSION,
                                      linked against the pass-1 stubs,
                                      left to a flat lookup (pass 2)

Every such symbol must belong to one of the frameworks by its prefix, or
be Python's (`_Py*`, left to the interpreter by `-undefined
dynamic_lookup`); any other is an error. wheel_inspect.py then checks the
pass-2 extension: nothing but Python's symbols left unbound.
"""

import os
import sys

import lief

lief.logging.disable()

# Each framework's symbols by their prefixes: Security's keychain, trust
# and certificate API (Sec), Authorization Services, CMS and Secure
# Transport (SSL); CoreFoundation's (CF, and its constant strings' ___CF).
FRAMEWORKS = {
    "Security": ("_Sec", "_kSec", "_Authorization", "_kAuthorization", "_CMS", "_kCMS", "_SSL", "_kSSL"),
    "CoreFoundation": ("_CF", "_kCF", "___CF", "___kCF"),
}


def unbound(path: str) -> list[str]:
    """The imported symbols bound to no library (ordinal 0 or below:
    self, main executable, flat lookup)."""
    binary = lief.parse(path)
    return sorted({s.name for s in binary.imported_symbols if s.library_ordinal <= 0})


def is_python(name: str) -> bool:
    return name.startswith(("_Py", "__Py"))


def write(root: str, exports: dict[str, list[str]]) -> None:
    os.makedirs(os.path.join(root, "usr", "lib"), exist_ok=True)
    for name in FRAMEWORKS:
        directory = os.path.join(root, "System", "Library", "Frameworks", f"{name}.framework")
        os.makedirs(directory, exist_ok=True)
        symbols = ", ".join(exports.get(name, []))
        with open(os.path.join(directory, f"{name}.tbd"), "w") as f:
            f.write(
                "--- !tapi-tbd\n"
                "tbd-version:     4\n"
                "targets:         [ x86_64-macos, arm64-macos ]\n"
                f"install-name:    '/System/Library/Frameworks/{name}.framework/Versions/A/{name}'\n"
                "exports:\n"
                "  - targets:         [ x86_64-macos, arm64-macos ]\n"
                f"    symbols:         [ {symbols} ]\n"
                "...\n"
            )


def main() -> None:
    root = sys.argv[1]
    exports: dict[str, list[str]] = {}
    if len(sys.argv) > 2:
        strays = []
        for symbol in unbound(sys.argv[2]):
            owner = next((n for n, prefixes in FRAMEWORKS.items() if symbol.startswith(prefixes)), None)
            if owner:
                exports.setdefault(owner, []).append(symbol)
            elif not is_python(symbol):
                strays.append(symbol)
        if strays:
            sys.exit(f"symbols of no known framework left unbound: {strays}")
        print(", ".join(f"{n}: {len(s)} symbols" for n, s in sorted(exports.items())))
    write(root, exports)


if __name__ == "__main__":
    main()
