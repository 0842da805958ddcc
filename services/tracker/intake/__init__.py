"""What asks for jobs: migration intents, node drains and atomic drains, each sender proven and
authorized first."""
