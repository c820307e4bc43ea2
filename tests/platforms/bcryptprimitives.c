/* ProcessPrng, which Rust's standard library takes its random bytes from on
 * Windows (bcryptprimitives.dll, Windows 10 and later), for wine 8 (Debian
 * 12), which lacks the export: the same bytes from RtlGenRandom
 * (advapi32's SystemFunction036). Only test.sh's wine runs use it: it is
 * put beside the test binaries, where Windows looks for a DLL first. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n))
            return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
