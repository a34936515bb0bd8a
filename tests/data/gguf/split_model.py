"""Copies a GGUF model into shards with gguf-py's own splitting writer (GGUFWriter with
split_max_tensors, what llama.cpp's convert_hf_to_gguf.py --split-max-tensors uses), to check
that strata loads a split model as gguf-py writes it (docs/PERFORMANCE.md).

  python tests/data/gguf/split_model.py IN.gguf OUT_PREFIX TENSORS_PER_SHARD

writes OUT_PREFIX-00001-of-0000N.gguf ... Needs gguf (gguf-py) and numpy.
"""
import sys

import gguf

from gguf_copy import copy_metadata


def main():
    src, prefix, per_shard = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(prefix + ".gguf", arch, split_max_tensors=per_shard)
    copy_metadata(reader, writer)
    for t in reader.tensors:
        writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
