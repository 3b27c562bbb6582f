from clusterset_dns.cli import main

raise SystemExit(main())
