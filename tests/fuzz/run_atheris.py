"""The long, coverage-guided run of one fuzz target with atheris (libFuzzer); ``make fuzz`` runs every target.

    python tests/fuzz/run_atheris.py TARGET WORK_DIR [libFuzzer options, e.g. -max_total_time=600]

Starts from the target's seeds (fixtures, upstream reference files, regression
corpus) copied into WORK_DIR/corpus, where the inputs it finds go too; it
mutates them with libFuzzer's mutators and by structure (mutations.py). An
input that breaks the rule (tests/fuzz/targets.py) is saved as
WORK_DIR/crash-<sha1> with WORK_DIR/crash-<sha1>.txt saying how, once per
place it fails at, and the run goes on to find the others. Move such an input
to tests/fuzz/corpus/TARGET/ with a name that says what it is, fix the
parser, and the suite replays it from then on.
"""
import hashlib
import os
import random
import sys
import traceback

import atheris

# Coverage of the collection's own code only: instrumenting tomlkit and PyYAML too made each input
# several times slower, and what the parsers do with their results is what the rule is about.
with atheris.instrument_imports(include=["ansible_collections.gpuops"]):
    import mutations
    import targets


def _where(exc):
    """Where a violation comes from: the innermost frame of the collection, else of anything."""
    cause = exc.__cause__ or exc
    frames = traceback.extract_tb(cause.__traceback__)
    ours = [f for f in frames if "/plugins/" in f.filename] or frames
    last = ours[-1] if ours else None
    return "%s %s:%s" % (type(cause).__name__, last.filename if last else "?", last.lineno if last else "?")


def main():
    name, work = sys.argv[1], sys.argv[2]
    if name not in targets.TARGETS:
        sys.exit("unknown target %s; targets: %s" % (name, ", ".join(sorted(targets.TARGETS))))
    corpus = os.path.join(work, "corpus")
    os.makedirs(corpus, exist_ok=True)
    for data in targets.seeds(name):
        with open(os.path.join(corpus, hashlib.sha1(data).hexdigest()), "wb") as handle:
            handle.write(data)
    seen = set()

    def one_input(data):
        try:
            targets.check(name, data)
        except targets.Violation as exc:
            # An exception: where it was raised; a broken promise (a slow run, a vague message): what it was.
            where = _where(exc) if exc.__cause__ is not None else str(exc).partition(": ")[2][:80]
            if where in seen:
                return
            seen.add(where)
            path = os.path.join(work, "crash-%s" % hashlib.sha1(data).hexdigest())
            with open(path, "wb") as handle:
                handle.write(data)
            with open(path + ".txt", "w") as handle:
                handle.write("%s\n%s\n\n%s" % (where, exc, "".join(traceback.format_exception(exc.__cause__ or exc))))
            print("\n==== new failure (%s): %s\n%s\n" % (where, path, str(exc)[:500]), file=sys.stderr)

    def custom_mutator(data, max_size, seed):
        # Some of the time by structure (a document's values, a TOML file's table order), else libFuzzer's own.
        rng = random.Random(seed)
        if rng.random() < 0.4:
            mutated = mutations.mutate(data, rng, rng.randint(1, 3))
            if mutated is not None and len(mutated) <= max_size:
                return mutated
        return atheris.Mutate(data, max_size)

    args = [sys.argv[0], "-rss_limit_mb=2048", "-timeout=%d" % int(targets.TIME_LIMIT_S * 2),
            "-max_len=%d" % targets.SIZE_LIMIT, "-artifact_prefix=%s/" % work] + sys.argv[3:] + [corpus]
    dictionary = targets.dictionary(name)
    if dictionary:  # the tokens libFuzzer inserts: hostile texts and the format's own keys
        args.insert(1, "-dict=%s" % dictionary)
    atheris.Setup(args, one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
