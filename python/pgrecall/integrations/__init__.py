"""Adapters that put pgrecall behind the memory interfaces agent frameworks already use.

Each lives in a module of its own and imports its framework only there, so ``import pgrecall`` never needs
one: ``pgrecall.integrations.langgraph`` (``pip install 'pgrecall[langgraph]'``) and
``pgrecall.integrations.openai_agents`` (``pip install 'pgrecall[openai-agents]'``).
"""
