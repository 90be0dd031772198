"""What the scripts that write GGUF files with llama.cpp's own gguf-py share (llama_falcon_gguf.py,
llama_family_gguf.py): importing gguf-py from a llama.cpp checkout (not held by this repository),
and copying a tokenizer from another GGUF file into a writer."""
import os
import sys


def import_gguf(llama_cpp):
    sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
    import gguf  # noqa: E402  (llama.cpp's)
    return gguf


def tokenizer_reader(gguf, path):
    """field(name): a metadata value of the GGUF file at path, as gguf-py reads it."""
    tok = gguf.GGUFReader(path)

    def field(name):
        f = tok.fields[name]
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            if f.types[-1] == gguf.GGUFValueType.STRING:
                return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
            return [f.parts[i].tolist()[0] for i in f.data]
        if f.types[0] == gguf.GGUFValueType.STRING:
            return bytes(f.parts[f.data[0]]).decode("utf-8")
        return f.parts[f.data[0]].tolist()[0]
    return field


def add_tokenizer(w, field):
    """The tokenizer's model, tokens, scores, types, BOS and EOS into the writer w."""
    w.add_tokenizer_model(field("tokenizer.ggml.model"))
    w.add_token_list(field("tokenizer.ggml.tokens"))
    w.add_token_scores(field("tokenizer.ggml.scores"))
    w.add_token_types(field("tokenizer.ggml.token_type"))
    w.add_bos_token_id(field("tokenizer.ggml.bos_token_id"))
    w.add_eos_token_id(field("tokenizer.ggml.eos_token_id"))
