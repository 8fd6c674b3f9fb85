"""One mini-swe-agent run on one repository, for bench/runtime_vs_miniswe.py.

Runs in the bench environment (``.venv-bench``: ``pip install mini-swe-agent==2.4.6``), not in
Ratchet's: it imports only mini-swe-agent. Configured as its documentation recommends for a local
model without native tool calls: the packaged ``mini_textbased.yaml`` config, the
``litellm_textbased`` model class with ``custom_llm_provider: openai`` and ``api_base`` in
``model_kwargs``, ``cost_tracking: ignore_errors``, its ``DefaultAgent`` (the batch agent, not the
interactive one) and ``LocalEnvironment`` in the repository. Prints one JSON line: how the run
ended, model calls, prompt/completion tokens (the server's usage, summed) and wall time.

    python bench/_miniswe_worker.py --workdir DIR --task TEXT --api-base URL --step-limit 8

``--config toolcall`` runs its tool-calling config instead (``mini.yaml``, the ``litellm`` model
class: one ``bash`` tool sent as OpenAI ``tools``, its calls read from ``tool_calls``), for
bench/miniswe_toolcalls.py. ``--tool-choice required`` adds ``tool_choice`` to the model config's
``model_kwargs``, which mini-swe-agent documents as "additional arguments passed to the API" and
hands to ``litellm.completion`` as they are (its own SWE-bench config sets ``parallel_tool_calls``
there the same way); ``--no-parallel-tool-calls`` sends ``parallel_tool_calls: false`` there too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network here: use litellm's bundled map
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import yaml  # noqa: E402  (after the environment above, which litellm reads at import)
from minisweagent import __version__  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.config import builtin_config_dir  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models import get_model  # noqa: E402


#: The packaged configs: the text-based one (commands in fenced blocks, for models without native
#: tool calls) and the default tool-calling one (one ``bash`` tool, sent as OpenAI ``tools``).
CONFIGS = {"textbased": ("mini_textbased.yaml", "litellm_textbased"), "toolcall": ("mini.yaml", "litellm")}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--model-name", default="qwen")
    parser.add_argument("--step-limit", type=int, required=True)
    parser.add_argument("--max-tokens", type=int, default=768)
    parser.add_argument("--timeout", type=int, default=30, help="seconds per command (Ratchet's bash_timeout_s)")
    parser.add_argument("--path-prefix", default="", help="put this first on PATH (the interpreter the tests use)")
    parser.add_argument("--trajectory", default="")
    parser.add_argument("--config", choices=sorted(CONFIGS), default="textbased",
                        help="textbased: commands in fenced blocks; toolcall: its native bash tool (mini.yaml)")
    parser.add_argument("--tool-choice", default="", help="with --config toolcall: OpenAI tool_choice sent in "
                        "model_kwargs (auto | required); empty: not sent")
    parser.add_argument("--no-parallel-tool-calls", action="store_true", help="with --config toolcall: send "
                        "parallel_tool_calls: false in model_kwargs (one call per reply)")
    args = parser.parse_args()

    config_file, model_class = CONFIGS[args.config]
    config = yaml.safe_load((builtin_config_dir / config_file).read_text())
    model_cfg = dict(config["model"])
    model_cfg.update({
        "model_name": f"openai/{args.model_name}",
        "model_class": model_class,
        "cost_tracking": "ignore_errors",
        "model_kwargs": {**model_cfg.get("model_kwargs", {}), "custom_llm_provider": "openai",
                         "api_base": args.api_base, "api_key": "local", "temperature": 0.0,
                         "max_tokens": args.max_tokens,
                         **({"tool_choice": args.tool_choice} if args.tool_choice else {}),
                         **({"parallel_tool_calls": False} if args.no_parallel_tool_calls else {})},
    })
    env_cfg = dict(config.get("environment", {}))
    env_vars = dict(env_cfg.pop("env", {}))
    if args.path_prefix:
        env_vars["PATH"] = args.path_prefix + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")
    agent_cfg = {k: v for k, v in config["agent"].items() if k != "mode"}
    agent_cfg.update({"step_limit": args.step_limit, "cost_limit": 0.0})
    if args.trajectory:
        agent_cfg["output_path"] = Path(args.trajectory)
    agent = DefaultAgent(get_model(config=model_cfg),
                         LocalEnvironment(cwd=args.workdir, env=env_vars, timeout=args.timeout, **env_cfg),
                         **agent_cfg)
    started = time.perf_counter()
    try:
        info = agent.run(args.task)
        exit_status = info.get("exit_status", "")
    except Exception as exc:  # a backend failure is a failed task, recorded
        exit_status = f"error: {type(exc).__name__}: {exc}"[:300]
    wall = time.perf_counter() - started
    prompt = completion = 0
    for message in agent.messages:
        usage = ((message.get("extra") or {}).get("response") or {})
        usage = usage.get("usage") if isinstance(usage, dict) else None
        if usage:
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
    print(json.dumps({"exit_status": exit_status, "steps": agent.n_calls, "prompt_tokens": prompt,
                      "completion_tokens": completion, "wall_s": round(wall, 3), "version": __version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
