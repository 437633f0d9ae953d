"""datatrove's MinHash dedup, optionally after its SentenceDedup, on a JSONL corpus (for
bench/templates.py).

Run with the python of a virtual environment that has datatrove (never the project's own):

    python -m venv bench/.peers-dt
    bench/.peers-dt/bin/pip install datatrove orjson spacy xxhash tokenizers
    bench/.peers-dt/bin/python bench/peer_datatrove.py CORPUS.jsonl WORKDIR RESULT.json [--sentence]

The stages are datatrove's documented ones, with its defaults (``MinhashConfig()``: word 5-grams,
14 buckets x 8 hashes; ``SentDedupConfig()``: spans of 3 sentences, a page left with fewer than
50 words or 3 sentences removed), each on a ``LocalPipelineExecutor`` with one worker:

* SentenceDedup (``--sentence``): SentenceDedupSignature, SentenceFindDedups, SentenceDedupFilter
  (its output, the pages with the repeated spans removed, is the MinHash input)
* MinHash: MinhashDedupSignature, MinhashDedupBuckets (one task per bucket),
  MinhashDedupCluster, MinhashDedupFilter

RESULT.json: the ids of the documents kept and the wall seconds of all the stages.
"""

import json
import shutil
import sys
import time
from pathlib import Path


def main() -> None:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
        SentenceDedupFilter,
        SentenceDedupSignature,
        SentenceFindDedups,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.dedup.sentence_dedup import SentDedupConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    corpus, work, result = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    sentence = "--sentence" in sys.argv[4:]
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    logs = str(work / "logs")

    def execute(name: str, pipeline: list, tasks: int = 1) -> None:
        LocalPipelineExecutor(
            pipeline=pipeline, tasks=tasks, workers=1, logging_dir=f"{logs}/{name}"
        ).run()

    def reader(folder: Path, pattern: str | None = None):
        return JsonlReader(str(folder), glob_pattern=pattern, compression=None)

    t0 = time.perf_counter()
    src = reader(corpus.parent, corpus.name)
    if sentence:
        sd = SentDedupConfig()
        execute(
            "sd1", [src, SentenceDedupSignature(output_folder=str(work / "sd_sigs"), config=sd)]
        )
        execute(
            "sd2",
            [
                SentenceFindDedups(
                    data_folder=str(work / "sd_sigs"),
                    output_folder=str(work / "sd_dups"),
                    config=sd,
                )
            ],
        )
        execute(
            "sd3",
            [
                reader(corpus.parent, corpus.name),
                SentenceDedupFilter(data_folder=str(work / "sd_dups"), config=sd),
                JsonlWriter(str(work / "sd_out"), compression=None),
            ],
        )
        src = reader(work / "sd_out")

    mh = MinhashConfig()
    execute("mh1", [src, MinhashDedupSignature(output_folder=str(work / "mh_sigs"), config=mh)])
    execute(
        "mh2",
        [
            MinhashDedupBuckets(
                input_folder=str(work / "mh_sigs"),
                output_folder=str(work / "mh_buckets"),
                config=mh,
            )
        ],
        tasks=mh.num_buckets,
    )
    execute(
        "mh3",
        [
            MinhashDedupCluster(
                input_folder=str(work / "mh_buckets"),
                output_folder=str(work / "mh_remove"),
                config=mh,
            )
        ],
    )
    execute(
        "mh4",
        [
            reader(work / "sd_out") if sentence else reader(corpus.parent, corpus.name),
            MinhashDedupFilter(input_folder=str(work / "mh_remove")),
            JsonlWriter(str(work / "kept"), compression=None),
        ],
    )
    wall = time.perf_counter() - t0

    kept = []
    for f in sorted((work / "kept").glob("*.jsonl")):
        with open(f) as fh:
            kept.extend(json.loads(line)["id"] for line in fh)
    result.write_text(json.dumps({"kept": kept, "wall_s": wall}))


if __name__ == "__main__":
    main()
