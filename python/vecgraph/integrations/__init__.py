"""Integrations with agent frameworks, one module each, imported on their own (this package
imports none of them, so that ``import vecgraph`` needs none of their dependencies):

- :mod:`vecgraph.integrations.langchain`: a LangChain vector store, a hybrid retriever and
  memory tools (``pip install "vecgraph[langchain]"``);
- :mod:`vecgraph.integrations.llama_index`: LlamaIndex (``pip install "vecgraph[llama-index]"``);
- :mod:`vecgraph.integrations.mcp`: a Model Context Protocol server (``pip install "vecgraph[mcp]"``).
"""
