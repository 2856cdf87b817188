//go:build amd64

#include "textflag.h"

// Byte order that turns 8 bytes of row a (pixels x, x+1) and 8 of row b
// into, per byte k of a pixel, byte k of pixel x then of pixel x+1.
DATA pairShuf<>+0(SB)/8, $0x0703060205010400
DATA pairShuf<>+8(SB)/8, $0x0f0b0e0a0d090c08
GLOBL pairShuf<>(SB), RODATA|NOPTR, $16

// The same for 16 bytes of one row (pixels x to x+3), in each 128-bit
// lane: the pairs of pixels x, x+1, then of pixels x+1, x+2.
DATA pairShuf2<>+0(SB)/8, $0x0703060205010400
DATA pairShuf2<>+8(SB)/8, $0x0b070a0609050804
DATA pairShuf2<>+16(SB)/8, $0x0703060205010400
DATA pairShuf2<>+24(SB)/8, $0x0b070a0609050804
GLOBL pairShuf2<>(SB), RODATA|NOPTR, $32

// The rounding term, 1 << (precisionBits-1).
DATA halfConst<>+0(SB)/4, $0x00200000
GLOBL halfConst<>(SB), RODATA|NOPTR, $4

// func packPairsAVX2(p, a, b *byte, n int)
TEXT ·packPairsAVX2(SB), NOSPLIT, $0-32
	MOVQ    p+0(FP), DI
	MOVQ    a+8(FP), SI
	MOVQ    b+16(FP), DX
	MOVQ    n+24(FP), CX
	VMOVDQU pairShuf<>(SB), X7
	VMOVDQU pairShuf2<>(SB), Y6
	CMPQ    CX, $4
	JB      packOne

packTwo:
	// pixels x to x+3 of both rows, 16 bytes each, make pairs x and x+1
	VMOVDQU      (SI), X0
	VINSERTI128  $1, (DX), Y0, Y0
	VPSHUFB      Y6, Y0, Y0
	VPERMQ       $0xd8, Y0, Y0
	VPMOVZXBW    X0, Y1
	VEXTRACTI128 $1, Y0, X2
	VPMOVZXBW    X2, Y2
	VMOVDQU      Y1, (DI)
	VMOVDQU      Y2, 32(DI)
	ADDQ         $8, SI
	ADDQ         $8, DX
	ADDQ         $64, DI
	SUBQ         $2, CX
	CMPQ         CX, $4
	JAE          packTwo

packOne:
	DECQ CX
	JZ   packLast

packLoop:
	// pixels x and x+1 of both rows: 8 bytes each, all within the rows
	VMOVQ     (SI), X0
	VPINSRQ   $1, (DX), X0, X0
	VPSHUFB   X7, X0, X0
	VPMOVZXBW X0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $4, SI
	ADDQ      $4, DX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       packLoop

packLast:
	// the last pixel, paired with zeros: 4 bytes of each row
	VMOVD     (SI), X0
	VPINSRD   $2, (DX), X0, X0
	VPSHUFB   X7, X0, X0
	VPMOVZXBW X0, Y0
	VMOVDQU   Y0, (DI)
	VZEROUPPER
	RET

// func resampleAVX2(p *byte, first, count *int, pairs *int32, kpairs, m int, dstA, dstB *byte)
//
// Y0/Y2: sums of pixel*hi, Y1/Y3: sums of pixel*lo (Y1 starts at half),
// 8 int32 lanes: R, G, B, ignored of row a, then of row b.
TEXT ·resampleAVX2(SB), NOSPLIT, $0-64
	MOVQ         p+0(FP), SI
	MOVQ         first+8(FP), R8
	MOVQ         count+16(FP), R9
	MOVQ         pairs+24(FP), R10
	MOVQ         kpairs+32(FP), R11
	SHLQ         $3, R11
	MOVQ         m+40(FP), CX
	MOVQ         dstA+48(FP), DI
	MOVQ         dstB+56(FP), DX
	VPBROADCASTD halfConst<>(SB), Y7

outLoop:
	MOVQ   (R8), AX
	SHLQ   $5, AX
	ADDQ   SI, AX
	MOVQ   (R9), BX
	INCQ   BX
	SHRQ   $1, BX
	MOVQ   R10, R12
	VPXOR  Y0, Y0, Y0
	VMOVDQA Y7, Y1
	VPXOR  Y2, Y2, Y2
	VPXOR  Y3, Y3, Y3
	CMPQ   BX, $2
	JB     tail

pairLoop:
	VMOVDQU      (AX), Y4
	VPBROADCASTD (R12), Y5
	VPBROADCASTD 4(R12), Y6
	VPMADDWD     Y5, Y4, Y5
	VPMADDWD     Y6, Y4, Y6
	VPADDD       Y5, Y0, Y0
	VPADDD       Y6, Y1, Y1
	VMOVDQU      64(AX), Y4
	VPBROADCASTD 8(R12), Y5
	VPBROADCASTD 12(R12), Y6
	VPMADDWD     Y5, Y4, Y5
	VPMADDWD     Y6, Y4, Y6
	VPADDD       Y5, Y2, Y2
	VPADDD       Y6, Y3, Y3
	ADDQ         $128, AX
	ADDQ         $16, R12
	SUBQ         $2, BX
	CMPQ         BX, $2
	JAE          pairLoop

tail:
	TESTQ        BX, BX
	JZ           sum
	VMOVDQU      (AX), Y4
	VPBROADCASTD (R12), Y5
	VPBROADCASTD 4(R12), Y6
	VPMADDWD     Y5, Y4, Y5
	VPMADDWD     Y6, Y4, Y6
	VPADDD       Y5, Y0, Y0
	VPADDD       Y6, Y1, Y1

sum:
	VPADDD       Y2, Y0, Y0
	VPADDD       Y3, Y1, Y1
	VPSLLD       $11, Y0, Y0
	VPADDD       Y1, Y0, Y0
	VPSRAD       $22, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPACKSSDW    X1, X0, X0
	VPACKUSWB    X0, X0, X0
	VMOVD        X0, AX
	VPEXTRD      $1, X0, BX
	CMPQ         CX, $1
	JE           lastOut

	// 4-byte stores: the 4th byte is the next output's, written next
	MOVL AX, (DI)
	MOVL BX, (DX)
	ADDQ $3, DI
	ADDQ $3, DX
	ADDQ $8, R8
	ADDQ $8, R9
	ADDQ R11, R10
	DECQ CX
	JMP  outLoop

lastOut:
	MOVW AX, (DI)
	SHRL $16, AX
	MOVB AX, 2(DI)
	MOVW BX, (DX)
	SHRL $16, BX
	MOVB BX, 2(DX)
	VZEROUPPER
	RET

// Dword order that undoes the lane interleaving of VPACKSSDW and VPACKUSWB
// on four registers of 8 int32s (columns 0-7, 8-15, 16-23, 24-31).
DATA packPerm<>+0(SB)/4, $0
DATA packPerm<>+4(SB)/4, $4
DATA packPerm<>+8(SB)/4, $1
DATA packPerm<>+12(SB)/4, $5
DATA packPerm<>+16(SB)/4, $2
DATA packPerm<>+20(SB)/4, $6
DATA packPerm<>+24(SB)/4, $3
DATA packPerm<>+28(SB)/4, $7
GLOBL packPerm<>(SB), RODATA|NOPTR, $32

// func verticalRowAVX2(src *byte, stride int, coef *int32, n, width int, dst *byte)
//
// For every column i < width (a multiple of 8): the sum of half and
// src[j*stride+i]*coef[j] over taps j < n, in int32 lanes (wrapping as Go's
// int32 does), shifted right by precisionBits and saturated to a byte at
// dst[i]. 32 columns at a time in Y0-Y3, then 8 at a time in Y0.
TEXT ·verticalRowAVX2(SB), NOSPLIT, $0-48
	MOVQ         src+0(FP), SI
	MOVQ         stride+8(FP), DX
	MOVQ         coef+16(FP), R8
	MOVQ         n+24(FP), CX
	MOVQ         width+32(FP), BX
	MOVQ         dst+40(FP), DI
	VPBROADCASTD halfConst<>(SB), Y15
	VMOVDQU      packPerm<>(SB), Y14

block32:
	CMPQ    BX, $32
	JB      block8
	VMOVDQA Y15, Y0
	VMOVDQA Y15, Y1
	VMOVDQA Y15, Y2
	VMOVDQA Y15, Y3
	MOVQ    SI, AX
	MOVQ    R8, R9
	MOVQ    CX, R10
	TESTQ   R10, R10
	JZ      store32

tap32:
	VPBROADCASTD (R9), Y8
	VPMOVZXBD    (AX), Y4
	VPMOVZXBD    8(AX), Y5
	VPMOVZXBD    16(AX), Y6
	VPMOVZXBD    24(AX), Y7
	VPMULLD      Y8, Y4, Y4
	VPMULLD      Y8, Y5, Y5
	VPMULLD      Y8, Y6, Y6
	VPMULLD      Y8, Y7, Y7
	VPADDD       Y4, Y0, Y0
	VPADDD       Y5, Y1, Y1
	VPADDD       Y6, Y2, Y2
	VPADDD       Y7, Y3, Y3
	ADDQ         DX, AX
	ADDQ         $4, R9
	DECQ         R10
	JNZ          tap32

store32:
	VPSRAD    $22, Y0, Y0
	VPSRAD    $22, Y1, Y1
	VPSRAD    $22, Y2, Y2
	VPSRAD    $22, Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	VPERMD    Y0, Y14, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $32, BX
	JMP       block32

block8:
	CMPQ    BX, $8
	JB      done
	VMOVDQA Y15, Y0
	MOVQ    SI, AX
	MOVQ    R8, R9
	MOVQ    CX, R10
	TESTQ   R10, R10
	JZ      store8

tap8:
	VPBROADCASTD (R9), Y8
	VPMOVZXBD    (AX), Y4
	VPMULLD      Y8, Y4, Y4
	VPADDD       Y4, Y0, Y0
	ADDQ         DX, AX
	ADDQ         $4, R9
	DECQ         R10
	JNZ          tap8

store8:
	VPSRAD       $22, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPACKSSDW    X1, X0, X0
	VPACKUSWB    X0, X0, X0
	VMOVQ        X0, (DI)
	ADDQ         $8, SI
	ADDQ         $8, DI
	SUBQ         $8, BX
	JMP          block8

done:
	VZEROUPPER
	RET
