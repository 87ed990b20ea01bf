"""kiln.llm.generate: text generation with a LlamaModel's key/value cache.

    stream = generate(model, prompt_ids, 64, temperature=0.7, top_p=0.9, seed=0, eos_id=2)
    for token in stream:            # token ids, one at a time, as soon as each is chosen
        ...
    stream.stats                    # GenerationStats: prefill ms, decode tokens/s, stop reason

The prompt runs through the model in one forward (logits of its last position only); each
new token then runs alone through the cache. Greedy (temperature 0) picks the argmax, as
HuggingFace's generate(do_sample=False); sampling draws from kiln.multinomial with a
kiln.Generator, so a seed reproduces the same tokens.
"""
from __future__ import annotations

import operator
import time
from dataclasses import dataclass

import kiln


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    generated_tokens: int = 0
    prefill_s: float = 0.0        # the prompt's forward and the first token's choice
    decode_s: float = 0.0         # every later token: its forward and its choice
    stop_reason: str | None = None  # "eos", "stop", "max_new_tokens" or "context_length"

    @property
    def prefill_ms(self) -> float:
        return self.prefill_s * 1e3

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens per second after the first (which comes from the prefill)."""
        decoded = self.generated_tokens - 1
        return decoded / self.decode_s if decoded > 0 and self.decode_s else 0.0


class Sampler:
    """Chooses the next token from one position's logits (float32 [vocab])."""

    def __init__(self, temperature=0.0, top_k=None, top_p=None, repetition_penalty=None,
                 seed=None):
        if not isinstance(temperature, (int, float)) or temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0: greedy), got {temperature!r}")
        if top_k is not None and (not isinstance(top_k, int) or top_k <= 0):
            raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] or None, got {top_p!r}")
        if repetition_penalty is not None and not repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0 or None, got "
                             f"{repetition_penalty!r}")
        self.temperature, self.top_k, self.top_p = float(temperature), top_k, top_p
        self.repetition_penalty = repetition_penalty
        self.generator = kiln.Generator()
        if seed is None:
            self.generator.seed()        # a fresh nondeterministic seed
        else:
            self.generator.manual_seed(seed)

    def __call__(self, logits, history):
        """The next token id; history: the ids so far (prompt included, as HuggingFace)."""
        # One row of vocabulary logits: chosen on the host (the generator is a host one).
        logits = logits.cpu()
        if self.repetition_penalty is not None and self.repetition_penalty != 1.0:
            logits = self.penalize(logits, history)
        if self.temperature == 0.0:
            return int(logits.argmax())
        return self._sample(logits / self.temperature)

    def penalize(self, logits, history):
        """HuggingFace / CTRL's penalty: logits of tokens already seen are divided by the
        penalty when positive and multiplied by it when negative (both make them less
        likely for a penalty > 1)."""
        seen = kiln.tensor(sorted(set(history)), dtype=kiln.int64)
        values = logits.index_select(0, seen)
        p = self.repetition_penalty
        values = kiln.where(values > 0, values / p, values * p)
        return logits.clone().index_copy_(0, seen, values)

    def _sample(self, logits):
        # Candidates in descending order when top_k / top_p restrict them.
        if self.top_k is not None and self.top_k < logits.shape[0]:
            logits, ids = logits.topk(self.top_k)
        elif self.top_p is not None and self.top_p < 1:
            logits, ids = logits.sort(descending=True)
        else:
            ids = None
        probs = kiln.softmax(logits, 0)
        if self.top_p is not None and self.top_p < 1:
            # Keep the smallest prefix whose mass reaches top_p: a candidate stays when the
            # mass before it is still below top_p (so the most likely always stays).
            before = probs.cumsum(0) - probs
            probs = probs * (before < self.top_p)
        choice = int(kiln.multinomial(probs, 1, generator=self.generator))
        return choice if ids is None else int(ids[choice])


class Generation:
    """An iterator over generated token ids; `stats` and `tokens` fill in as it runs."""

    def __init__(self, model, prompt_ids, max_new_tokens, sampler, eos_ids, stop):
        self.model, self.prompt_ids = model, prompt_ids
        self.max_new_tokens, self.sampler = max_new_tokens, sampler
        self.eos_ids, self.stop = eos_ids, stop
        self.tokens: list[int] = []
        self.stats = GenerationStats(prompt_tokens=len(prompt_ids))
        self._steps = self._run()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._steps)

    def _run(self):
        stats, model = self.stats, self.model
        context = model.config.context_length
        if self.max_new_tokens == 0:
            stats.stop_reason = "max_new_tokens"
            return
        # Room for the prompt and every token that will be fed back (the last is not).
        cache = model.new_cache(1, min(context, len(self.prompt_ids) + self.max_new_tokens - 1))
        history = list(self.prompt_ids)
        start = time.perf_counter()
        logits = model.forward(kiln.tensor([history], dtype=kiln.int64), cache, 0,
                               last_only=True)
        token = self.sampler(logits[0, 0], history)
        stats.prefill_s = time.perf_counter() - start
        while True:
            history.append(token)
            self.tokens.append(token)
            stats.generated_tokens += 1
            yield token
            reason = self._stop_reason(token, len(history), context)
            if reason:
                stats.stop_reason = reason
                return
            start = time.perf_counter()
            logits = model.forward(kiln.tensor([[token]], dtype=kiln.int64), cache,
                                   len(history) - 1, last_only=True)
            token = self.sampler(logits[0, 0], history)
            stats.decode_s += time.perf_counter() - start

    def _stop_reason(self, token, total_tokens, context):
        if token in self.eos_ids:
            return "eos"
        if self.stop is not None and self.stop(self.tokens):
            return "stop"
        if len(self.tokens) >= self.max_new_tokens:
            return "max_new_tokens"
        if total_tokens >= context:
            return "context_length"
        return None


def generate(model, prompt_ids, max_new_tokens, *, temperature=0.0, top_k=None, top_p=None,
             repetition_penalty=None, seed=None, eos_id=None, stop=None) -> Generation:
    """Generates up to max_new_tokens token ids after prompt_ids (a non-empty list of ints).

    temperature 0 is greedy; otherwise logits / temperature are sampled, restricted to the
    top_k most likely and / or the smallest set of mass top_p. repetition_penalty (> 1
    discourages) applies to every token seen, prompt included. eos_id: an id or a collection
    of ids; an end token is yielded and ends the generation, as in HuggingFace. stop: a
    callback given the list of generated ids after each token; True ends the generation.
    Generation also ends when prompt and output fill the model's context length.

    Returns a Generation: iterate it for the ids; its `stats` (GenerationStats) and `tokens`
    are complete once the loop ends."""
    prompt_ids = _check_prompt(model, prompt_ids)
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) \
            or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    if eos_id is None:
        eos_ids = frozenset()
    elif isinstance(eos_id, int):
        eos_ids = frozenset([eos_id])
    else:
        eos_ids = frozenset(int(i) for i in eos_id)
    if stop is not None and not callable(stop):
        raise ValueError(f"stop must be a callable or None, got {type(stop).__name__}")
    sampler = Sampler(temperature, top_k, top_p, repetition_penalty, seed)
    return Generation(model, prompt_ids, max_new_tokens, sampler, eos_ids, stop)


def _check_prompt(model, prompt_ids):
    vocab, context = model.config.vocab_size, model.config.context_length
    ids = []
    for t in prompt_ids:
        try:
            if isinstance(t, bool):
                raise TypeError
            t = operator.index(t)        # ints, numpy integers, 0-d integer tensors
        except TypeError:
            raise ValueError(f"generate: prompt token {t!r} is not an integer id") from None
        if not 0 <= t < vocab:
            raise ValueError(f"generate: prompt token {t} is not an id in [0, {vocab})")
        ids.append(t)
    prompt_ids = ids
    if not prompt_ids:
        raise ValueError("generate: the prompt is empty (give at least one token id, e.g. BOS)")
    if len(prompt_ids) >= context:
        raise ValueError(f"generate: the prompt's {len(prompt_ids)} tokens leave no room in "
                         f"the context length {context}")
    return prompt_ids
