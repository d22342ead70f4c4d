"""`python -m metaplane.admin …` runs the `metaplane` command; so does spark-submit given this
file's path, which is how `metaplane analyze` runs on a Spark cluster:

    spark-submit --master spark://host:7077 "$(python -c 'import metaplane.admin.__main__ as m;
    print(m.__file__)')" analyze --snapshot SNAPSHOT --out OUT
"""

from metaplane.admin.cli import main

if __name__ == "__main__":
    main()
