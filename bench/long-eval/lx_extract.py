"""LangExtract's `extract` on one long document, as a whole process: bench/long-eval's peer side.
Cuts the document at MAX_CHAR_BUFFER characters, sends each chunk to the loopback server (the
OpenAI provider, JSON mode, one pass), aligns each extraction to the text, and prints what it
found as JSON: extractions, and how many were aligned exactly, fuzzily, or not at all.

    python lx_extract.py DOCUMENT_JSONL BASE_URL MAX_CHAR_BUFFER WORKERS
"""

import json
import sys

import langextract as lx
from langextract.providers.openai import OpenAILanguageModel

path, base_url, buffer, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = json.loads(open(path, encoding="utf-8").readline())["input"]
examples = [
    lx.data.ExampleData(
        text="Brightwave Analytics, a maker of sensors, was bought by the Halvorsen Group.",
        extractions=[
            lx.data.Extraction("definition", "Brightwave Analytics", attributes={"definition": "a maker of sensors"}),
            lx.data.Extraction("relationship", "Halvorsen Group", attributes={"predicate": "bought", "object": "Brightwave Analytics"}),
        ],
    )
]
model = OpenAILanguageModel(model_id="loopback", api_key="none", base_url=base_url, max_workers=workers)
doc = lx.extract(
    text_or_documents=text,
    prompt_description="Extract the definitions of entities and the relationships between them.",
    examples=examples,
    model=model,
    max_char_buffer=buffer,
    max_workers=workers,
    batch_length=max(10, workers),
    extraction_passes=1,
    fence_output=False,
    use_schema_constraints=False,
    show_progress=False,
)
status = {}
for e in doc.extractions:
    key = str(e.alignment_status.value) if e.alignment_status else "not aligned"
    status[key] = status.get(key, 0) + 1
print(json.dumps({"extractions": len(doc.extractions), "alignment": status}))
