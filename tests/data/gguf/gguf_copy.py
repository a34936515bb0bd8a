"""Shared by the scripts beside it: copying a GGUF file's metadata with gguf-py."""
import gguf


def copy_metadata(reader, writer):
    """Every key-value pair of `reader` (a GGUFReader) into `writer` (a GGUFWriter), except the
    architecture, which the writer was created with, and the reader's virtual GGUF.* fields."""
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)
