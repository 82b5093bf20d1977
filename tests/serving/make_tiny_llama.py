"""Write a tiny randomly initialised Llama and a tiny byte-level BPE tokenizer to a folder.

Run with the serving environment's python (it needs transformers and tokenizers):

    python tests/serving/make_tiny_llama.py OUT_DIR

No download: the tokenizer is trained here on generated text and the weights are random
(seeded). head_dim is 64 because vLLM's CPU attention rejects smaller heads.
"""

from __future__ import annotations

import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def corpus() -> list[str]:
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "paris",
        "capital",
        "france",
        "answer",
        "number",
        "tool",
        "city",
        "weather",
        "think",
        "final",
        "reasoning",
        "alpha",
        "beta",
        "gamma",
        "cobalt",
        "quartz",
        "onyx",
        "seven",
        "eight",
        "fifty",
        "six",
    ]
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(400)]
    lines += [" ".join(str(i * k) for k in range(1, 12)) for i in range(200)]
    lines.append('{"name": "get_weather", "arguments": {"city": "Paris"}} <think> </think>')
    return lines


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.add_tokens(["<think>", "</think>"])  # so reasoning parsers find their markers as single tokens
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def build_model(out: Path, vocab_size: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        torch_dtype="bfloat16",
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    from transformers import AutoTokenizer

    build_model(out, len(AutoTokenizer.from_pretrained(out)))
    print(out)


if __name__ == "__main__":
    main()
