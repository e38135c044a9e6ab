#include "textflag.h"

// func getg() uintptr
// Returns the address of the calling goroutine's runtime g, which Go keeps
// in thread-local storage on amd64.
TEXT ·getg(SB),NOSPLIT,$0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
