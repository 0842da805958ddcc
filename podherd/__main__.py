from podherd.cli import main

raise SystemExit(main())
