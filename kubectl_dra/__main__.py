from kubectl_dra.cli import main

raise SystemExit(main())
