"""The embedding model ``query_memory`` searches by meaning with, against a loopback
OpenAI-compatible server (the real ``langchain-openai`` and ``openai`` code runs)."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from langorch.app.memory import MemoryManager
from langorch.domain.errors import ProviderNotAvailableError
from langorch.llm.embeddings import LazyEmbeddings, parse_embedding_model
from langorch.llm.settings import OpenAISettings
from tests.llm_servers import FakeOpenAI


def test_preferences_are_searched_by_meaning_with_the_configured_model() -> None:
    # Given an OpenAI-compatible server whose vectors put the query beside the restaurant
    with FakeOpenAI().running() as server:
        server.embeddings([[1.0, 0.0], [0.0, 1.0]])  # the two preferences
        server.embeddings([[0.9, 0.1]])  # the query
        embeddings = LazyEmbeddings(
            "openai:text-embedding-3-small",
            openai_api_key="sk-test",
            openai=OpenAISettings(base_url=server.base_url),
        )
        manager = MemoryManager(InMemoryStore(), embeddings=embeddings)
        manager.update_preferences("u1", {"restaurant": "Chipotle", "seat": "aisle"})
        # When memory is searched
        found = manager.search_preferences("u1", "something to eat")
    # Then the model named in the setting embedded the items and the query, and the closest
    # item alone matched
    assert found == {"restaurant": "Chipotle"}
    assert [r.path for r in server.received] == ["/v1/embeddings", "/v1/embeddings"]
    assert server.received[0].body["model"] == "text-embedding-3-small"


def test_a_refused_key_is_named_without_the_key() -> None:
    # Given a server that refuses the key
    with FakeOpenAI().running() as server:
        server.error(401, "Incorrect API key provided: sk-te****")
        embeddings = LazyEmbeddings(
            "openai:text-embedding-3-small",
            openai_api_key="sk-test",
            openai=OpenAISettings(base_url=server.base_url),
        )
        # When a query is embedded, then the failure says what to configure
        with pytest.raises(ProviderNotAvailableError, match="configure a valid key") as caught:
            embeddings.embed_query("lunch")
    assert "sk-te" not in str(caught.value)


def test_an_embedding_model_names_its_provider() -> None:
    # Given a setting without a known provider, then it is refused with the forms it may take
    with pytest.raises(ValueError, match="bedrock:<model id>"):
        parse_embedding_model("text-embedding-3-small")
