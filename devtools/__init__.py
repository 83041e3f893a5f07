"""Developer tools: the demo's seed data and simulated agent, the benchmark and its baseline
endpoint, the console's render timer. Not part of the product: settings install this app only
when LOOPWARDEN_DEVTOOLS=true (`./dev run` and the bench set it; production leaves it off), so a
deployment has none of these commands and no benchmark route. It imports the product apps;
they never import it."""
