#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes the safetensors seed corpus (fuzz/corpus/safetensors/): a few small valid files and
# near-misses of each check, assembled byte by byte. Rerun after changing it; commit the output.
set -eu
cd "$(dirname "$0")/corpus/safetensors"
rm -f ./*.safetensors

# st FILE HEADER DATA [DECLARED_LEN]: 8-byte LE header length, header, data (printf escapes).
st() {
    local file=$1 header=$2 data=$3 n=${4:-${#2}} le="" i
    for i in 0 1 2 3 4 5 6 7; do le+=$(printf '\\%03o' $(((n >> (8 * i)) & 255))); done
    { printf "$le"; printf '%s' "$header"; printf "$data"; } >"$file"
}

BF16x4='\x80\x3f\x80\xbf\x00\x00\x49\x40'
st valid_bf16.safetensors \
   '{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}  ' \
   "$BF16x4"
st valid_mixed.safetensors \
   '{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"c":{"dtype":"I64","shape":[],"data_offsets":[8,16]},"e":{"dtype":"BF16","shape":[0,3],"data_offsets":[16,16]}}' \
   '\x00\x3c\x00\xc0\x00\x00\x80\x3f\x01\x00\x00\x00\x00\x00\x00\x00'
st valid_odd_offset.safetensors \
   '{"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}}' '\x01\x02\x03\x04\x05\x06'
st valid_empty.safetensors '{}' ''
st valid_model.safetensors \
   '{"model.embed_tokens.weight":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},"model.norm.weight":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},"model.layers.0.self_attn.q_proj.weight":{"dtype":"F32","shape":[1,1],"data_offsets":[12,16]}}' \
   "$BF16x4"'\x80\x3f\x80\x3f\x00\x00\x80\x3f'
st bad_overlap.safetensors \
   '{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}' \
   "$BF16x4"
st bad_size.safetensors '{"w":{"dtype":"BF16","shape":[3,3],"data_offsets":[0,8]}}' "$BF16x4"
st bad_beyond.safetensors '{"w":{"dtype":"BF16","shape":[8],"data_offsets":[0,16]}}' "$BF16x4"
st bad_dtype.safetensors '{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}' "$BF16x4"
st bad_dup.safetensors \
   '{"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"w":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}' \
   "$BF16x4"
st bad_shape.safetensors \
   '{"w":{"dtype":"BF16","shape":[1,-1,1,1,1,1,1,1,1],"data_offsets":[0,2]}}' "$BF16x4"
st bad_overflow.safetensors \
   '{"w":{"dtype":"F32","shape":[4503599627370496,4503599627370496,16],"data_offsets":[0,0]}}' ''
st bad_wrap.safetensors \
   '{"w":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}}' ''
st bad_json.safetensors '{"w":{"dtype":"BF16","shape":[2' "$BF16x4"
st bad_hlen.safetensors '{}' '' 4096
printf '\x02\x00\x00' >bad_short.safetensors
ls -l
