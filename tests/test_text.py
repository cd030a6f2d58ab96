from memkit.core.text import Analyzer


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


def test_irregular_past_forms_read_as_their_base_when_asked():
    plain, irregular = Analyzer(), Analyzer(irregular=True)
    # "won" is an NLTK stopword (as in "won't"): a plain analyzer loses the word entirely
    assert plain("My pumpkin won second prize") == plain("My pumpkin second prize")
    assert irregular("My pumpkin won second prize") == irregular("my pumpkin win second prize")
    assert irregular("We drove to Leeds and flew home") == irregular("we drive to Leeds, fly home")
    # the edinburgh-pumpkin-driving-test walk: "What did he feed it?" and "fed it seaweed tea every
    # week"
    assert irregular("I grew it and fed it seaweed") == irregular("I grow it and feed it seaweed")
    assert irregular("a bit of rose") == ["bit", "rose"]  # nouns as well
    assert irregular("won't") == []  # the contraction is still a stopword
    assert plain != irregular and hash(plain) != hash(irregular)
    assert Analyzer(**irregular.params()) == irregular
