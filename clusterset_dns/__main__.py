from clusterset_dns.process.cli import main

raise SystemExit(main())
