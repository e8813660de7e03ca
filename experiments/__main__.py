from experiments.cli import main

raise SystemExit(main())
