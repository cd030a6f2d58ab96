from memkit.text import Analyzer


def test_unicode_tokens_and_case_folding():
    a = Analyzer(stopwords=None, stemmer=None)
    assert a("Café NAÏVE Zürich, 東京 straße!") == ["café", "naïve", "zürich", "東京", "strasse"]


def test_punctuation_and_underscores_split_tokens():
    a = Analyzer(stopwords=None, stemmer=None)
    assert a("e-mail foo_bar 3.14 don't") == ["e", "mail", "foo", "bar", "3", "14", "don't"]


def test_stopwords_removed_and_configurable():
    assert Analyzer(stemmer=None)("What did you do with the dog?") == ["dog"]
    assert Analyzer(stopwords="lucene", stemmer=None)("What did you do with the dog?") == [
        "what",
        "did",
        "you",
        "do",
        "dog",
    ]
    assert Analyzer(stopwords=["dog"], stemmer=None)("the dog") == ["the"]


def test_stemming_is_optional():
    assert Analyzer(stopwords=None)("running runs painted") == ["run", "run", "paint"]
    assert Analyzer(stopwords=None, stemmer=None)("running runs") == ["running", "runs"]


def test_possessive_and_curly_apostrophe():
    a = Analyzer(stemmer=None)
    assert a("Caroline’s painting") == ["caroline", "painting"]
    assert a("Caroline's painting") == ["caroline", "painting"]


def test_unknown_stopword_list_is_refused():
    import pytest

    with pytest.raises(ValueError, match="stopwords"):
        Analyzer(stopwords="klingon")
