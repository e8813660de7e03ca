"""`python -m experiments` as a script file, for `spark-submit` (which runs files, not modules).

    spark-submit --master spark://host:7077 --py-files lab.zip scripts/lab_experiments.py run herd --out /shared/r
"""

import sys

from experiments.cli import main

if __name__ == "__main__":
    sys.exit(main())
