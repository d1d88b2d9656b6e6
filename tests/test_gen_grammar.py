"Every generation schema compiles into a llama.cpp grammar (long maxLength strings crash llama-cpp-python 0.3.36 with a segfault, so each schema is tried in a child process)."
import subprocess, sys, importlib.util
import pytest
from pace.llm import ModelNotFoundError
from pace.backends.llamacpp import resolve_gguf

SCHEMAS = ["pace.gen.persona:PersonaText", "pace.gen.profile:EgoProfile", "pace.gen.profile:AlterList", "pace.gen.cases:TemporalCase",
           "pace.gen.cases:CaseDraft", "pace.gen.cases:fixed_temporal_schema(2)", "pace.gen.cases:fixed_temporal_schema(3)", "pace.gen.validate:Review", "pace.gen.distractors:NearMisses", "pace.gen.atomize:Atoms", "pace.gen.kb:Everyday"]

CHILD = """
import importlib, sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False)
for spec in sys.argv[2:]:
    mod, name = spec.split(":")
    obj = getattr(importlib.import_module(mod), name.split("(")[0])
    if "(" in name: obj = obj(int(name.split("(")[1].rstrip(")")))   # a schema built per case, e.g. by the number of steps
    schema = obj.model_json_schema()
    llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=2, response_format={"type": "json_object", "schema": schema})
    print("ok", name, flush=True)
"""

def test_every_generation_schema_compiles_into_a_llamacpp_grammar(models_dir_in_tmp):
    if importlib.util.find_spec("llama_cpp") is None: pytest.skip("llama-cpp-python is not installed (the local extra)")
    try: path = resolve_gguf("smollm2-135m")
    except ModelNotFoundError as e: pytest.skip(str(e))
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), *SCHEMAS], capture_output=True, text=True, timeout=600)
    ok = [l.split()[1] for l in r.stdout.splitlines() if l.startswith("ok ")]
    assert r.returncode == 0 and ok == [s.split(":")[1] for s in SCHEMAS], (r.returncode, ok, r.stderr[-800:])
