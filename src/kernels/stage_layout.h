// SPDX-License-Identifier: Apache-2.0
/* stage_layout.h — how static mode divides a worker CTA's shared memory, in plain C so the host
 * plans with the device's numbers (codegen.c: which tiles stage whole; the backend's device info:
 * what a builder may count on).
 *
 * Static mode's block on the H100 / H200 (227 KB opt-in, 1 KB left for __shared__ variables):
 *   [0, 96 KB)              the task kernels' own area (PK_CUDA_SMEM_BYTES)
 *   [96 KB, 96 KB + stage)  a linear task's whole weight tile, staged before its dependency wait
 *                           (at most PK_WSTAGE_BYTES; larger tiles stream through the GEMV's
 *                           async rings), or the staged decode attention's overflow
 */
#ifndef PK_STAGE_LAYOUT_H
#define PK_STAGE_LAYOUT_H

/* The largest weight tile a linear task stages whole (runtime.cuh, pk_stage_weights). The model
 * builder asks for it through pk_kernel_device_info: a streamed qkv tile leaves no room for the
 * next attention task's KV stage. */
#define PK_WSTAGE_BYTES (96u * 1024u)

#endif /* PK_STAGE_LAYOUT_H */
